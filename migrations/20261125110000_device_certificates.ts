import type { Knex } from 'knex';

/**
 * Device certificates for mutual TLS (core/certificates).
 *
 * `device_ca` holds the one device CA the service creates when no manufacturer CA is configured:
 * its certificate in clear (verifying needs nothing else) and its private key sealed with the
 * server secret. One row under a fixed id, so processes starting together race on the primary
 * key and all end up with the first one's CA.
 *
 * `device_certificates` has no foreign key to `devices`: unclaiming deletes the device but must
 * leave its certificates behind as revoked (the history of what was trusted, and a fingerprint
 * that stays refused whoever claims the serial next). Rows are found by fingerprint (the broker)
 * and by device (the API).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('device_ca', (t) => {
    t.text('id').primary();
    t.text('certificate_pem').notNullable();
    t.text('private_key_sealed').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('device_certificates', (t) => {
    // SHA-256 of the DER certificate, lowercase hex.
    t.specificType('fingerprint_sha256', 'text COLLATE "C"').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.uuid('device_id').notNullable();
    t.specificType('serial', 'text COLLATE "C"').notNullable();
    t.text('serial_number').notNullable();
    t.text('key_algorithm').notNullable();
    t.text('certificate_pem').notNullable();
    t.timestamp('not_before', { useTz: true }).notNullable();
    t.timestamp('not_after', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true });
    // revoked | unclaimed
    t.text('revoked_reason');
  });
  await knex.raw('CREATE INDEX device_certificates_device ON device_certificates (device_id, created_at DESC)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('device_certificates');
  await knex.schema.dropTableIfExists('device_ca');
}
