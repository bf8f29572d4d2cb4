import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { openTestDatabase, usingPostgres, type OpenTestDatabase } from '../helpers/test-database';
import type { Database } from '#core/db/database';
import { preparedRaw } from '#core/db/prepared';
import { ifStarted } from '../helpers/teardown';

/**
 * A statement run through preparedRaw is planned once per pool connection: after PostgreSQL's
 * five trial runs with the values, it keeps a generic plan when that plan costs no more. The
 * pool used to force custom plans on every connection, which replanned each device-list page
 * (0.7-1.2 ms of PostgreSQL CPU a page, bench/devices-list.bench.ts). PostgreSQL only: the
 * embedded database is one in-process connection with PostgreSQL's default planning.
 */
describe.runIf(usingPostgres())('prepared statements on the PostgreSQL pool', () => {
  let opened: OpenTestDatabase;
  let database: Database;

  beforeAll(async () => {
    opened = await openTestDatabase();
    database = opened.database;
  });
  afterAll(async () => {
    await ifStarted(opened)?.close();
  });

  it('runs a generic plan once the trial runs are done, instead of planning every run', async () => {
    // A key lookup: its generic plan costs what a custom one does, so PostgreSQL switches to it.
    const sql = 'SELECT id FROM accounts WHERE id = ?::uuid';
    const plans = await database.knex.transaction(async (trx) => {
      // One transaction: every run on the same pool connection, whose prepared statements are read back.
      for (let run = 0; run < 8; run++) await preparedRaw(trx, sql, ['00000000-0000-4000-8000-000000000000']);
      const { rows } = await trx.raw<{ rows: Array<{ generic_plans: string; custom_plans: string }> }>(
        `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%FROM accounts WHERE id = $1::uuid%'`,
      );
      return rows;
    });
    expect(plans).toHaveLength(1);
    expect(Number(plans[0]!.custom_plans)).toBe(5);
    expect(Number(plans[0]!.generic_plans)).toBe(3);
  });
});
