import type { Knex } from 'knex';

/**
 * Update locks (docs/ota.md "Update locks", docs/device-protocol.md "Update locks"): a device
 * says "not now" and the OTA engine holds its update until the lock ends.
 *
 * One row per device that ever sent a lock, apart from `devices` (whose row the heartbeat flush
 * rewrites in batches: a lock is rare, and must not widen that hot row):
 * - `until`: when the lock ends (the device's request cut to the 24 h cap, and for an
 *   emergency-lighting fixture never before 24 h after its last duration test); null once released;
 * - `reason`: emergency_test, recharging, occupied or other;
 * - `requested_until`: what the device asked for, before the cap (shows a cut request);
 * - `set_at`: when the service received the lock;
 * - `duration_test_at`: when the device's last emergency duration test ended.
 * The row goes with its device (an unclaim deletes the device).
 *
 * Emergency lighting (EN 62034): `models.emergency_lighting` marks a model's fixtures;
 * `devices.emergency_lighting` overrides it per device (null: the model's).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('device_update_locks', (t) => {
    t.uuid('device_id').primary().references('devices.id').onDelete('CASCADE');
    t.uuid('account_id').notNullable();
    t.timestamp('until', { useTz: true });
    t.text('reason');
    t.timestamp('requested_until', { useTz: true });
    t.timestamp('set_at', { useTz: true });
    t.timestamp('duration_test_at', { useTz: true });
  });
  await knex.raw('ALTER TABLE models ADD COLUMN emergency_lighting boolean NOT NULL DEFAULT false');
  await knex.raw('ALTER TABLE devices ADD COLUMN emergency_lighting boolean');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE devices DROP COLUMN emergency_lighting');
  await knex.raw('ALTER TABLE models DROP COLUMN emergency_lighting');
  await knex.schema.dropTable('device_update_locks');
}
