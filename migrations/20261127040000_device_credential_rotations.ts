import type { Knex } from 'knex';

/**
 * Planned credential rotations (docs/device-protocol.md "Credentials rotation"): a new password,
 * or a certificate renewed from a CSR the device sent, waiting for the device to confirm it.
 *
 * While a rotation is open (`completed_at` null) both the device's current credential and the
 * new one are accepted until `grace_ends_at`; afterwards only the new one. A password is kept as
 * its SHA-256 (`secret_hash`, like `device_credentials`), plus a copy sealed with the server
 * secret (`secret_sealed`) so it can be delivered again on every connection while it is pending;
 * the sealed copy is erased the moment the rotation ends, whatever ends it. A certificate
 * rotation names the certificate it issued (`fingerprint_sha256`, in `device_certificates`).
 *
 * At most one open rotation per device and kind (partial unique index): a second password
 * rotation replaces the first, a second CSR is refused while one is pending. Rows go with their
 * device (unclaim).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('device_credential_rotations', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.uuid('device_id').notNullable().references('devices.id').onDelete('CASCADE');
    // password | certificate
    t.text('kind').notNullable();
    t.text('secret_hash');
    t.text('secret_sealed');
    t.text('fingerprint_sha256');
    // Who asked: `api_key:<id>`, `user:<id>`, or `device:<serial>` for a CSR.
    t.text('requested_by').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('grace_ends_at', { useTz: true }).notNullable();
    // The device acknowledged the delivery (a certificate is re-delivered until then).
    t.timestamp('acknowledged_at', { useTz: true });
    t.timestamp('completed_at', { useTz: true });
    // acknowledged | connected | grace_expired | replaced | revoked
    t.text('outcome');
  });
  await knex.raw(
    'CREATE UNIQUE INDEX device_credential_rotations_open ON device_credential_rotations (device_id, kind) WHERE completed_at IS NULL',
  );
  await knex.raw(
    'CREATE INDEX device_credential_rotations_grace ON device_credential_rotations (grace_ends_at) WHERE completed_at IS NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('device_credential_rotations');
}
