import type { Knex } from 'knex';

/**
 * Fleet energy by model, firmware or site read one roll-up row per attribution and day (with
 * 100,000 fixtures: 1,200 attributions, 108,000 rows over 90 days, joined to the attributions
 * and grouped). `luminaire_fleet_daily_groups` keeps the same energy per account, dimension
 * (`model`, `firmware`, `site`: the attribution's model name, firmware version or site id, '' for
 * none), UTC day and value, written by the ingest with the other fleet roll-ups, so the answer
 * reads a few rows per day (bench/luminaire-ingest.bench.ts). Filled here from the existing
 * roll-ups.
 *
 * `luminaire_state` is rewritten by every batch for every device in it: free room in its pages
 * (fillfactor) lets PostgreSQL update the row in place (a HOT update) instead of adding an
 * index entry each time. PGlite takes the same storage parameter.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE luminaire_fleet_daily_groups (
    account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    dimension text NOT NULL CHECK (dimension IN ('model', 'firmware', 'site')),
    day date NOT NULL,
    key text NOT NULL,
    energy_wh double precision NOT NULL DEFAULT 0,
    points integer NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, dimension, day, key)
  )`);
  await knex.raw(`INSERT INTO luminaire_fleet_daily_groups (account_id, dimension, day, key, energy_wh, points)
    SELECT f.account_id, g.dimension, f.day, g.key, sum(f.energy_wh), sum(f.points)
      FROM luminaire_fleet_daily f
      JOIN luminaire_attributions a ON a.id = f.attribution_id AND a.account_id = f.account_id
     CROSS JOIN LATERAL (VALUES ('model', a.model), ('firmware', COALESCE(a.firmware, '')),
                                ('site', COALESCE(a.site_id::text, ''))) AS g(dimension, key)
     GROUP BY 1, 2, 3, 4`);
  await knex.raw('ALTER TABLE luminaire_state SET (fillfactor = 70)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE luminaire_state RESET (fillfactor)');
  await knex.raw('DROP TABLE IF EXISTS luminaire_fleet_daily_groups');
}
