import type { Knex } from 'knex';

/**
 * Unexpected reboots and reconnects per firmware version, and `failed` that sticks
 * (docs/fixture-health.md):
 * - `device_connection_days`: per device, UTC day and firmware the device ran, one row made by the
 *   first news of that day (or of a new version) in the heartbeat ingest's batched write, counting
 *   unexpected reboots (uptime went back with no update in progress) and reconnects. A row is a
 *   device-day: the exposure of these two signals. `firmware` is '' while the device never
 *   reported one (a key column cannot be null). No foreign key to the device: like the luminaire
 *   roll-ups the days outlive it, and the account that owned it then keeps them.
 * - `device_health.failed_mark`: the light source failure counter's segment in which the device
 *   was judged `failed` (it stays failed until that counter restarts).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE device_connection_days (
    device_id uuid NOT NULL,
    day date NOT NULL,
    firmware text NOT NULL,
    account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    model text NOT NULL,
    unexpected_reboots integer NOT NULL DEFAULT 0,
    reconnects integer NOT NULL DEFAULT 0,
    PRIMARY KEY (device_id, day, firmware)
  )`);
  await knex.raw('CREATE INDEX device_connection_days_account_day ON device_connection_days (account_id, day, model)');
  await knex.raw('ALTER TABLE device_health ADD COLUMN failed_mark jsonb');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE device_health DROP COLUMN IF EXISTS failed_mark');
  await knex.raw('DROP TABLE IF EXISTS device_connection_days');
}
