import type { Knex } from 'knex';

/**
 * The device list's `q` (a case-insensitive substring of serial or name) was a scan of every
 * device of the account: a rare term (120 matches among 100,000) read all 100,000 rows for each
 * page and for its count, about 30 ms of PostgreSQL per page (bench/devices-list.bench.ts). Trigram
 * indexes (pg_trgm, GIN) answer `ILIKE '%term%'` of 3 characters or more from the index; shorter
 * or common terms keep the serial-ordered scan, which the planner still picks for them.
 *
 * Only where pg_trgm can be installed: the embedded PGlite does not load it, and a role without
 * the right to create it keeps working without the indexes (the query is the same, only slower).
 * Tried under a savepoint so a refusal (or an extension installed in a schema off the search
 * path) does not abort the migration's transaction.
 */
export async function up(knex: Knex): Promise<void> {
  const available = await knex.raw<{ rows: unknown[] }>(`SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'`);
  if (available.rows.length === 0) return;
  await knex.raw('SAVEPOINT device_search_trigrams');
  try {
    await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_trgm');
    // Without a pending list (fastupdate off): the planner costs a GIN index without its pending
    // list, and after a claim of thousands of devices it chose this index for the broker's
    // `serial = ANY(...)` credential lookup over the unique btree, scanning the whole pending list
    // each time: 25-95 ms per lookup instead of 0.1 ms until autovacuum ran
    // (bench/connection-capacity.bench.ts on PostgreSQL). The same for names, so no query on them
    // meets a plan costed without its pending list.
    await knex.raw(
      'CREATE INDEX IF NOT EXISTS devices_serial_trgm ON devices USING gin (serial gin_trgm_ops) WITH (fastupdate = off)',
    );
    await knex.raw(
      'CREATE INDEX IF NOT EXISTS devices_name_trgm ON devices USING gin (name gin_trgm_ops) WITH (fastupdate = off)',
    );
    // The planner picks the index only when it expects few matches, judged from the columns'
    // histograms: with the default 100 samples a rare term in an account of 20,000 devices was
    // taken for 6 % of them and scanned in serial order (24 ms); 1,000 samples judge it right.
    await knex.raw('ALTER TABLE devices ALTER COLUMN serial SET STATISTICS 1000');
    await knex.raw('ALTER TABLE devices ALTER COLUMN name SET STATISTICS 1000');
  } catch {
    // Not allowed to create it, or installed in a schema off the search path: no indexes.
    await knex.raw('ROLLBACK TO SAVEPOINT device_search_trigrams');
  }
  await knex.raw('RELEASE SAVEPOINT device_search_trigrams');
}

export async function down(knex: Knex): Promise<void> {
  // The extension stays: other objects may use it by now.
  await knex.raw('ALTER TABLE devices ALTER COLUMN name SET STATISTICS -1');
  await knex.raw('ALTER TABLE devices ALTER COLUMN serial SET STATISTICS -1');
  await knex.raw('DROP INDEX IF EXISTS devices_name_trgm');
  await knex.raw('DROP INDEX IF EXISTS devices_serial_trgm');
}
