import type { Knex } from 'knex';

/**
 * `devices.status` changes whenever an update is sent to a device or finishes (`updating` and
 * back). While the column was indexed, each of those writes was a non-HOT update: a new entry
 * in each of the table's seven indexes. (A connect or disconnect stays non-HOT: `connectivity`
 * is in the predicate of the presence index.) Measured on
 * 100,000 devices, setting 5,000 devices to `updating` took 324 ms with the index and 32 ms
 * without it, and the OTA dispatch pays that for every command it sends (bench/ota.bench.ts).
 *
 * What the index served: a devices list filtered by status. Without it that filter reads the
 * account's rows (about 20 ms at 100,000 devices), which the same request already pays for its
 * `total` (counting the matching devices reads them all, index or not).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS devices_account_status_serial');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX IF NOT EXISTS devices_account_status_serial ON devices (account_id, status, serial)');
}
