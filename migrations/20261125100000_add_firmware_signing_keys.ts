import type { Knex } from 'knex';

/**
 * Signed firmware. An account registers the public half of an Ed25519 key it keeps offline;
 * from then on every upload carries a signature over the image's SHA-256 digest, which the
 * service checks and hands to devices with each OTA command.
 *
 * A key's `id` is derived from the key itself (first 16 hex digits of SHA-256 over its SPKI
 * DER), so a device can tell which of its embedded keys a command names without asking us.
 * Registering another key retires the current one instead of deleting it: versions signed with
 * it keep their signature and its id, and their commands still verify on devices that trust it.
 * At most one key per account is current (not retired).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('firmware_signing_keys', (t) => {
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('id').notNullable();
    t.text('public_key').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('retired_at', { useTz: true });
    t.primary(['account_id', 'id']);
  });
  await knex.raw(
    'CREATE UNIQUE INDEX firmware_signing_keys_one_current ON firmware_signing_keys (account_id) WHERE retired_at IS NULL',
  );
  await knex.schema.alterTable('firmware_versions', (t) => {
    // base64 of the 64 signature bytes; both null for versions uploaded without a key registered.
    t.text('signature');
    t.text('signing_key_id');
    // No cascade: a key row must outlive every version that names it (keys are retired, never deleted).
    t.foreign(['account_id', 'signing_key_id']).references(['account_id', 'id']).inTable('firmware_signing_keys');
  });
  await knex.raw(
    `ALTER TABLE firmware_versions ADD CONSTRAINT firmware_versions_signed_with_key CHECK ((signature IS NULL) = (signing_key_id IS NULL))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('firmware_versions', (t) => {
    t.dropChecks(['firmware_versions_signed_with_key']);
    t.dropForeign(['account_id', 'signing_key_id']);
    t.dropColumn('signature');
    t.dropColumn('signing_key_id');
  });
  await knex.schema.dropTable('firmware_signing_keys');
}
