import type { Knex } from 'knex';

/**
 * - `config_version_marks`: the highest configuration version a serial was ever given, written
 *   when the serial is unclaimed. A new claim of the serial starts above it, so configuration
 *   versions of a serial only ever go up (docs/device-protocol.md "Configuration"): a module that
 *   keeps the version it applied last sees the next owner's first configuration as a new one.
 *   Keyed by serial alone and holding nothing but the number: nothing of the previous owner
 *   (account, settings) reaches the next one.
 * - `device_updates.error_code`: the device's reason for a failed or rolled-back update, from the
 *   protocol's vocabulary (OtaProgress `error_code`), so failures can be grouped.
 * - `device_updates.sent_connection`: the broker connection the command was last sent on. The
 *   re-send to a device that came back skips a command already sent on its current connection
 *   (a device coming online with a queued update got it twice within milliseconds).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('config_version_marks', (t) => {
    t.specificType('serial', 'text COLLATE "C"').primary();
    t.integer('version').notNullable();
  });
  await knex.schema.alterTable('device_updates', (t) => {
    t.text('error_code');
    t.text('sent_connection');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('device_updates', (t) => {
    t.dropColumn('sent_connection');
    t.dropColumn('error_code');
  });
  await knex.schema.dropTable('config_version_marks');
}
