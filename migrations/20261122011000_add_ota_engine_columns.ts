import type { Knex } from 'knex';

/**
 * Columns the OTA engine needs beyond the first schema (docs/ota.md):
 * - `reported_success_at`: the device said `succeeded` but has not yet come back on the target
 *   version (success is boot-confirmed; the update stays `rebooting` until the heartbeat shows it).
 * - `reconnects_after` / `health_failed_at`: the health gate counts reconnects in the minutes
 *   after a successful update; too many mark the update unhealthy (a failure for the threshold).
 * - Re-sends on reconnect keep the job id and count in the existing `attempts` column.
 * - `deployments.failures_acknowledged`: failures an operator accepted by resuming after an
 *   automatic pause; the threshold counts only failures beyond them.
 * Indexes: the queued rows of a deployment (dispatch), and every update by firmware version
 * (a version cannot be deleted while an unfinished update targets it).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('device_updates', (t) => {
    t.timestamp('reported_success_at', { useTz: true });
    t.integer('reconnects_after').notNullable().defaultTo(0);
    t.timestamp('health_failed_at', { useTz: true });
  });
  await knex.schema.alterTable('deployments', (t) => {
    t.integer('failures_acknowledged').notNullable().defaultTo(0);
  });
  await knex.raw(`CREATE INDEX device_updates_firmware_active ON device_updates (firmware_version_id)
    WHERE state IN ('queued','sent','downloading','installing','rebooting')`);
  await knex.raw(`CREATE INDEX device_updates_deployment_queued ON device_updates (deployment_id, batch)
    WHERE state = 'queued'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS device_updates_deployment_queued');
  await knex.raw('DROP INDEX IF EXISTS device_updates_firmware_active');
  await knex.schema.alterTable('deployments', (t) => {
    t.dropColumn('failures_acknowledged');
  });
  await knex.schema.alterTable('device_updates', (t) => {
    t.dropColumn('health_failed_at');
    t.dropColumn('reconnects_after');
    t.dropColumn('reported_success_at');
  });
}
