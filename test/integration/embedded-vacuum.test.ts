import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { usingPostgres } from '../helpers/test-database';
import { ifStarted } from '../helpers/teardown';
import { vacuumEmbeddedDatabase } from '#core/housekeeping/embedded-vacuum';
import type { Logger } from '#core/logger';

interface TableStats {
  n_live_tup: number;
  n_dead_tup: number;
  last_vacuum: Date | null;
  last_analyze: Date | null;
  reltuples: number;
}

/**
 * The embedded database has no autovacuum (PGlite runs no background workers): the service
 * vacuums and analyzes it itself (core/housekeeping/embedded-vacuum.ts). Without it the outbox queue kept every
 * dispatched row as a dead one and the planner never learnt how many devices there are.
 */
describe.skipIf(usingPostgres())('embedded database maintenance', () => {
  let server: TestServer;
  let account: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount({ quota: 1000 });
  });
  afterAll(async () => {
    await ifStarted(server)?.close();
  });

  const statsOf = async (table: string): Promise<TableStats> => {
    const knex = server.service.database.knex;
    // Counters reach pg_stat_* at most once a second unless a flush is asked for.
    await knex.raw('SELECT pg_stat_force_next_flush()');
    await knex.raw('SELECT 1');
    const { rows } = await knex.raw<{ rows: TableStats[] }>(
      `SELECT s.n_live_tup::int, s.n_dead_tup::int, s.last_vacuum, s.last_analyze, c.reltuples::int AS reltuples
         FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
        WHERE s.schemaname = current_schema() AND s.relname = ?`,
      [table],
    );
    return rows[0]!;
  };

  it('vacuums the dispatched outbox rows away and gives the planner the fleet size', async () => {
    const maintenance = server.service.embeddedVacuumLoop!;
    expect(maintenance).not.toBeNull();
    await buildModel(account, 'LX-200');
    // 600 devices: each claim writes its events through the outbox, whose queue rows are deleted once sent.
    for (let chunk = 0; chunk < 3; chunk++) {
      const claimed = await account.api.post('/api/v1/devices/claim', {
        serials: serials('VAC', 200, 1 + chunk * 200),
        model: 'LX-200',
      });
      expect(claimed.status, JSON.stringify(claimed.body)).toBe(201);
    }
    await server.service.outbox.settle();

    const before = { queue: await statsOf('events_pending'), devices: await statsOf('devices') };
    expect(before.queue.n_live_tup).toBe(0);
    expect(before.queue.n_dead_tup).toBeGreaterThanOrEqual(600);
    expect(before.devices.last_analyze).toBeNull();

    await maintenance.run();

    const after = { queue: await statsOf('events_pending'), devices: await statsOf('devices') };
    expect(after.queue.n_dead_tup).toBeLessThan(10);
    expect(after.queue.last_vacuum).not.toBeNull();
    expect(after.devices.last_analyze).not.toBeNull();
    expect(after.devices.reltuples).toBe(600);
  });

  it('leaves a table alone until it changed by autovacuum’s thresholds again', async () => {
    const maintenance = server.service.embeddedVacuumLoop!;
    await maintenance.run();
    const analyzed = (await statsOf('devices')).last_analyze;
    // A few changes: far under 50 rows + 10 % of 600.
    const renamed = await account.api.patch('/api/v1/devices/VAC-0001', { name: 'Lobby' });
    expect(renamed.status).toBe(200);
    await maintenance.run();
    expect((await statsOf('devices')).last_analyze).toEqual(analyzed);
  });
});

describe.skipIf(usingPostgres())('embedded database maintenance pass', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await ifStarted(server)?.close();
  });

  it('goes on past a table dropped after the list was read, and says nothing of it', async () => {
    const knex = server.service.database.knex;
    // Due by the insert threshold (1,000 rows): a_doomed first in name order, z_kept last.
    for (const table of ['a_doomed', 'z_kept']) {
      await knex.raw(`CREATE TABLE ${table} (id int PRIMARY KEY)`);
      await knex.raw(`INSERT INTO ${table} SELECT generate_series(1, 2000)`);
    }
    await knex.raw('SELECT pg_stat_force_next_flush()');
    await knex.raw('SELECT 1');
    // The table goes between the list and its VACUUM, as a luminaire partition past its retention does.
    let dropped = false;
    const racing = new Proxy(knex, {
      get(target, property, receiver) {
        if (property !== 'raw') return Reflect.get(target, property, receiver) as unknown;
        return async (sql: string, ...rest: unknown[]) => {
          if (!dropped && /^(VACUUM|ANALYZE)/.test(sql)) {
            dropped = true;
            await target.raw('DROP TABLE a_doomed');
          }
          return target.raw(sql, ...(rest as []));
        };
      },
    });
    const warnings: unknown[] = [];
    const summaries: Array<{ vacuumed: string[] }> = [];
    const logger = {
      warn: (...args: unknown[]) => warnings.push(args),
      debug: (summary: { vacuumed: string[] }) => summaries.push(summary),
    };
    const tables = await vacuumEmbeddedDatabase({
      knex: racing,
      logger: logger as unknown as Logger,
      stopping: () => false,
    });
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['public.a_doomed', 'public.z_kept']));
    const kept = await knex.raw<{ rows: Array<{ last_vacuum: Date | null }> }>(
      `SELECT last_vacuum FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = 'z_kept'`,
    );
    expect(kept.rows[0]!.last_vacuum).not.toBeNull();
    expect(warnings).toEqual([]);
    // The log counts what was maintained: the dropped table was listed, not vacuumed.
    expect(summaries).toHaveLength(1);
    expect(summaries[0]!.vacuumed).toContain('public.z_kept');
    expect(summaries[0]!.vacuumed).not.toContain('public.a_doomed');
  });
});

describe.runIf(usingPostgres())('PostgreSQL maintenance', () => {
  it('is left to autovacuum: the service starts no maintenance of its own', async () => {
    const server = await startTestServer();
    try {
      expect(server.service.embeddedVacuumLoop).toBeNull();
    } finally {
      await server.close();
    }
  });
});
