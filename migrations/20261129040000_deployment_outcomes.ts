import type { Knex } from 'knex';

/**
 * What a deployment finished with, kept when it finishes (core/deployments/deployment-figures.ts):
 * its per-state counts, failures per error code and bytes sent, which every view of it counted
 * again over all its updates (160-290 ms of PostgreSQL CPU at 100,000 devices, for each finished
 * deployment on a page of the list). The health gate may still fail a succeeded update after the
 * finish: those are counted live, from the partial index below (a few rows a deployment). Its
 * predicate column makes the health gate's count of a reconnect (one write per device that
 * reconnects within its update's window) a write of every index of the row, as each of the
 * update's state changes already is.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE deployment_outcomes (
      deployment_id uuid PRIMARY KEY REFERENCES deployments (id) ON DELETE CASCADE,
      counts jsonb NOT NULL,
      failures jsonb NOT NULL,
      transfer jsonb NOT NULL,
      recorded_at timestamptz NOT NULL
    )`);
  await knex.raw(
    'CREATE INDEX device_updates_health_failed ON device_updates (deployment_id) WHERE health_failed_at IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX device_updates_health_failed');
  await knex.raw('DROP TABLE deployment_outcomes');
}
