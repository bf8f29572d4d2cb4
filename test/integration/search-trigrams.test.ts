import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDatabase, usingPostgres, type OpenTestDatabase } from '../helpers/test-database';
import { indexable, likeSubstring } from '#core/devices/store/device-list.store';
import { ifStarted } from '../helpers/teardown';
import { explainAnalyze, type PlanNode } from '../helpers/explain';

/**
 * The device list sends a search term to the trigram indexes only where pg_trgm can narrow it
 * (`indexable`); for the others the index reads every account's terms. Checked against pg_trgm
 * itself: for each term, whether a trigram index scan of its pattern reads every entry.
 * PostgreSQL only (the embedded database has no pg_trgm).
 */
describe.runIf(usingPostgres())('which search terms a trigram index narrows', () => {
  let opened: OpenTestDatabase;
  const ROWS = 2000;

  beforeAll(async () => {
    opened = await openTestDatabase();
    const { knex } = opened.database;
    await knex.raw('CREATE TABLE trigram_probe (s text)');
    await knex.raw(`INSERT INTO trigram_probe SELECT 'S-' || g || '-Lé' FROM generate_series(1, ${ROWS}) g`);
    await knex.raw('CREATE INDEX trigram_probe_s ON trigram_probe USING gin (s gin_trgm_ops)');
    await knex.raw('ANALYZE trigram_probe');
  });
  afterAll(async () => ifStarted(opened)?.close());

  const entriesRead = (node: PlanNode): number =>
    (node['Node Type'] === 'Bitmap Index Scan' ? (node['Actual Rows'] ?? 0) : 0) +
    (node.Plans ?? []).reduce((sum, child) => sum + entriesRead(child), 0);

  it.each(['ab', '-a', 'a-', 'S-1', '1-', '-1-', '---', '12', '123', 'a_b', 'a%b', 'é-', '-é', 'x1-', '-x', 'ab-', ''])(
    '%j: narrowed by the index exactly where the list says so',
    async (term) => {
      const plan = await opened.database.knex.transaction(async (trx) => {
        await trx.raw('SET LOCAL enable_seqscan = off');
        return explainAnalyze(trx, 'SELECT s FROM trigram_probe WHERE s ILIKE ?', [likeSubstring(term)]);
      });
      expect({ term, narrowed: entriesRead(plan) < ROWS }).toEqual({ term, narrowed: indexable(term) });
    },
  );
});
