import type { Knex } from 'knex';

/**
 * Scheduling a deployment writes one `device_updates` row and one `queued` history row per
 * target: 100,000 of each for a large fleet, in one transaction (bench/ota.bench.ts:
 * under 3 s). Measured on 100,000 targets, the row-by-row foreign-key checks were about a third
 * of that (each one a lookup that also locks the referenced device row), and two of the seven
 * indexes only duplicated others. So:
 *  - `device_updates` and `device_events` keep their columns but no foreign keys. What the keys
 *    guarded is held by the code instead: every transaction that inserts update rows holds the
 *    account row lock and reads the devices and the deployment inside it, and unclaiming takes
 *    the same lock and deletes the device's updates and history itself
 *    (device.service.ts `unclaim`). Firmware versions and deployments are never deleted.
 *  - `(deployment_id, state, batch)` serves both the per-state counts of a deployment and the
 *    dispatcher's "queued in the open batches", replacing two indexes; the partial index on
 *    active firmware versions had no query.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE device_updates
    DROP CONSTRAINT IF EXISTS device_updates_deployment_id_foreign,
    DROP CONSTRAINT IF EXISTS device_updates_device_id_foreign,
    DROP CONSTRAINT IF EXISTS device_updates_firmware_version_id_foreign`);
  await knex.raw('ALTER TABLE device_events DROP CONSTRAINT IF EXISTS device_events_device_id_foreign');
  await knex.raw('CREATE INDEX device_updates_deployment_state_batch ON device_updates (deployment_id, state, batch)');
  await knex.raw('DROP INDEX IF EXISTS device_updates_deployment_state');
  await knex.raw('DROP INDEX IF EXISTS device_updates_deployment_queued');
  await knex.raw('DROP INDEX IF EXISTS device_updates_firmware_active');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX device_updates_firmware_active ON device_updates (firmware_version_id)
    WHERE state IN ('queued','sent','downloading','installing','rebooting')`);
  await knex.raw(
    `CREATE INDEX device_updates_deployment_queued ON device_updates (deployment_id, batch) WHERE state = 'queued'`,
  );
  await knex.raw('CREATE INDEX device_updates_deployment_state ON device_updates (deployment_id, state)');
  await knex.raw('DROP INDEX IF EXISTS device_updates_deployment_state_batch');
  await knex.raw(`ALTER TABLE device_events ADD CONSTRAINT device_events_device_id_foreign
    FOREIGN KEY (device_id) REFERENCES devices(id) ON DELETE CASCADE NOT VALID`);
  await knex.raw(`ALTER TABLE device_updates
    ADD CONSTRAINT device_updates_deployment_id_foreign FOREIGN KEY (deployment_id) REFERENCES deployments(id) ON DELETE CASCADE NOT VALID,
    ADD CONSTRAINT device_updates_device_id_foreign FOREIGN KEY (device_id) REFERENCES devices(id) ON DELETE CASCADE NOT VALID,
    ADD CONSTRAINT device_updates_firmware_version_id_foreign FOREIGN KEY (firmware_version_id) REFERENCES firmware_versions(id) NOT VALID`);
}
