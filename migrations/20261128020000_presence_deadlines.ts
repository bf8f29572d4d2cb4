import type { Knex } from 'knex';

/**
 * The presence sweep's deadlines in a narrow table of their own: a row per online device, made
 * on connect, moved by heartbeats (by a whole interval at a time, as before), deleted on
 * disconnect or timeout.
 *
 * On `devices` the sweep's index (`offline_after WHERE connectivity = 'online'`) made every
 * connect and disconnect a write PostgreSQL cannot do in place (HOT): both change the index's
 * column and its predicate, so the new row version went into every index of the table. A
 * connect-like write of 1,000 devices among 120,000 cost 40 µs per row that way and 7 µs once
 * no index covered what it changes (measured here, after the trigram indexes had left
 * `devices`); the narrow table's insert or delete costs a fraction of that.
 *
 * An online device without a deadline gets one due now: the sweep then checks its last sign of
 * life (`heard_at`) and marks it offline or sets its exact deadline.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE device_presence_deadlines (
      device_id uuid PRIMARY KEY REFERENCES devices (id) ON DELETE CASCADE,
      offline_after timestamptz NOT NULL
    )`);
  await knex.raw(`
    INSERT INTO device_presence_deadlines (device_id, offline_after)
    SELECT id, COALESCE(offline_after, now()) FROM devices WHERE connectivity = 'online'`);
  await knex.raw('CREATE INDEX device_presence_deadlines_due ON device_presence_deadlines (offline_after)');
  await knex.raw('DROP INDEX IF EXISTS devices_online_offline_after');
  await knex.raw('ALTER TABLE devices DROP COLUMN offline_after');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE devices ADD COLUMN offline_after timestamptz');
  await knex.raw(`
    UPDATE devices d SET offline_after = p.offline_after
      FROM device_presence_deadlines p WHERE p.device_id = d.id`);
  await knex.raw("CREATE INDEX devices_online_offline_after ON devices (offline_after) WHERE connectivity = 'online'");
  await knex.raw('DROP TABLE device_presence_deadlines');
}
