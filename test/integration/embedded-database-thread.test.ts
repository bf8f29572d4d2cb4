import { describe, it, expect, afterEach } from 'vitest';
import knexFactory, { type Knex } from 'knex';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { PGlite } from '@electric-sql/pglite';
import { serialize } from 'pg-protocol';
import { Parser } from 'pg-protocol/dist/parser.js';
import { RawProtocolRunner } from '#core/db/pglite-protocol';
import { openDatabase, type Database } from '#core/db/database';
import { EmbeddedDatabaseThread } from '#core/db/pglite-worker-client';
import { ConfigurationError, loadConfig } from '#core/config';
import { DatabaseHealth } from '#core/db/database-health';
import { createLogger } from '#core/logger';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../helpers/test-database';

/**
 * The embedded database in its own thread (EMBEDDED_DATABASE_THREAD=worker, the default): a long
 * query leaves the event loop free, SQL errors reach knex as from a server, what was committed
 * survives a close and a crash of the thread, and a crashed thread fails its queries instead of
 * hanging them, then comes back on the next query.
 */

/** The longest the event loop went without running a 5 ms timer while `work` ran. */
async function longestStall(work: () => Promise<unknown>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  try {
    await work();
    // A loop blocked until now has not ticked yet: let it, so the stall is counted.
    await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    clearInterval(timer);
  }
  return Math.max(longest, performance.now() - last);
}

const QUERY_MS = 600;

describe.skipIf(usingPostgres())('embedded database thread', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function open(thread: 'worker' | 'main'): Promise<{ db: TestDatabase; database: Database }> {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const database = await openDatabase({ dataDir: db.dataDir, embeddedThread: thread });
    cleanups.push(() => database.close());
    await database.migrate();
    return { db, database };
  }

  it('keeps the event loop running during a long query in worker mode, and blocks it in main mode', async () => {
    const worker = await open('worker');
    const main = await open('main');
    const query = (database: Database) => database.knex.raw(`SELECT pg_sleep(${QUERY_MS / 1000})`);
    // Warm both (first query plans, first pages read) before measuring.
    await query(worker.database);
    await query(main.database);

    const workerStall = await longestStall(() => query(worker.database));
    const mainStall = await longestStall(() => query(main.database));

    // The main thread's stall is the whole query; the worker's is what two busy shared cores add
    // to any timer (up to 50 ms measured on an idle loop there), never the query's length.
    expect(mainStall).toBeGreaterThan(QUERY_MS * 0.9);
    expect(workerStall).toBeLessThan(100);
  });

  it('counts a thread busy with a long statement as up: the health probe does not turn requests into 503s', async () => {
    const { database } = await open('worker');
    // Two probes in a row of more than 200 ms would mark the database down; the statement holds
    // the thread for 1.5 s, so before, the probes queued behind it and did.
    const health = new DatabaseHealth(() => database.probe(), createLogger('silent'), {
      intervalMs: 100,
      timeoutMs: 200,
      failuresToDown: 2,
    });
    const changes: boolean[] = [];
    health.onChange((up) => changes.push(up));
    health.start();
    try {
      await database.knex.raw('SELECT pg_sleep(1.5)');
    } finally {
      health.stop();
    }
    expect(changes).toEqual([]);
    expect(health.isUp()).toBe(true);
  });

  it('gives knex the database error of a unique violation, with its code and constraint', async () => {
    const { database } = await open('worker');
    const knex = database.knex;
    await knex.raw('CREATE TABLE thread_probe (id int PRIMARY KEY, note text)');
    await knex('thread_probe').insert({ id: 1, note: 'first' });
    const error = await knex('thread_probe')
      .insert({ id: 1, note: 'again' })
      .then(
        () => null,
        (e: unknown) => e as { code?: string; constraint?: string },
      );
    expect(error).toMatchObject({ code: '23505', constraint: 'thread_probe_pkey' });
    // The connection is usable after the error, inside a transaction too.
    await knex.transaction(async (trx) => {
      await trx('thread_probe').insert({ id: 2, note: 'second' });
    });
    expect(await knex('thread_probe').orderBy('id').pluck('id')).toEqual([1, 2]);
  });

  it('keeps what was committed through a close, and the main-thread mode reads the same folder', async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const first = await openDatabase({ dataDir: db.dataDir, embeddedThread: 'worker' });
    await first.migrate();
    await first.knex.raw('CREATE TABLE thread_probe (id int PRIMARY KEY)');
    await first.knex('thread_probe').insert([{ id: 1 }, { id: 2 }, { id: 3 }]);
    await first.close();

    const again = await openDatabase({ dataDir: db.dataDir, embeddedThread: 'main' });
    cleanups.push(() => again.close());
    expect(await again.knex('thread_probe').orderBy('id').pluck('id')).toEqual([1, 2, 3]);
  });

  it('fails the query in flight when the thread dies, then serves the next query from a new thread', async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const thread = await EmbeddedDatabaseThread.open(path.join(db.dataDir, 'pglite'));
    cleanups.push(() => thread.close());
    const quiet = () => undefined;
    const knex: Knex = knexFactory({
      // The crash's "Connection Error" is what this test expects: not for the console.
      log: { warn: quiet, error: quiet, debug: quiet, deprecate: quiet },
      client: 'pg',
      connection: () => thread.pgConfig() as Knex.PgConnectionConfig,
      pool: { min: 1, max: 1 },
      acquireConnectionTimeout: 60_000,
    });
    cleanups.push(() => knex.destroy());
    await knex.raw('CREATE TABLE thread_probe (id int PRIMARY KEY)');
    await knex('thread_probe').insert({ id: 1 });

    const inFlight = knex.raw('SELECT pg_sleep(5)').then(
      () => null,
      (e: unknown) => e as Error,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    const crashedAt = performance.now();
    await thread.terminate();
    const error = await inFlight;
    expect(error?.message).toMatch(/embedded database thread exited/);
    // Failed at once, not after the 5 s query or a pool timeout.
    expect(performance.now() - crashedAt).toBeLessThan(2000);

    // The next query gets a new connection, on a new thread that recovered the folder.
    expect(await knex('thread_probe').pluck('id')).toEqual([1]);
  });
});

/** The backend messages of a raw answer, by name (dataRow, commandComplete, readyForQuery...). */
function messageNames(answer: Uint8Array): string[] {
  const names: string[] = [];
  new Parser().parse(Buffer.from(answer), (message) => names.push(message.name));
  return names;
}

/** V8's own collector, reachable once the flag is set (the test process runs without --expose-gc). */
function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  (vm.runInNewContext('gc') as () => void)();
}

describe.skipIf(usingPostgres())("the embedded database thread's protocol runner", () => {
  it('answers in raw wire protocol and keeps nothing of an answer once it is returned', async () => {
    const pglite = await PGlite.create();
    try {
      await pglite.exec(
        "CREATE TABLE rows_probe AS SELECT g AS id, repeat('x', 1000) AS note FROM generate_series(1, 100) g",
      );
      const runner = new RawProtocolRunner(pglite);
      const query = () => runner.run(new Uint8Array(serialize.query('SELECT id, note FROM rows_probe')));

      const names = messageNames(await query());
      expect(names.filter((n) => n === 'dataRow')).toHaveLength(100);
      expect(names.slice(-2)).toEqual(['commandComplete', 'readyForQuery']);
      // An SQL error is an answer too, and the next query runs as usual.
      expect(messageNames(await runner.run(new Uint8Array(serialize.query('SELECT * FROM no_such_table'))))).toEqual([
        'error',
        'readyForQuery',
      ]);

      // 1,500 answers of 100 KB each: before, PGlite's raw call parsed and kept every one of them
      // (about 150 MB, growing for as long as the service ran).
      collectGarbage();
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 1500; i++) await query();
      collectGarbage();
      const grownMb = (process.memoryUsage().heapUsed - before) / 1024 / 1024;
      expect(grownMb).toBeLessThan(20);
    } finally {
      await pglite.close();
    }
  });
});

describe('EMBEDDED_DATABASE_THREAD', () => {
  it('refuses a value it does not know, naming the variable', () => {
    expect(loadConfig({ EMBEDDED_DATABASE_THREAD: 'main' }).embeddedDatabaseThread).toBe('main');
    expect(loadConfig({}).embeddedDatabaseThread).toBe('worker');
    expect(() => loadConfig({ EMBEDDED_DATABASE_THREAD: 'threads' })).toThrow(ConfigurationError);
    expect(() => loadConfig({ EMBEDDED_DATABASE_THREAD: 'threads' })).toThrow(
      'EMBEDDED_DATABASE_THREAD=threads: expected worker or main',
    );
  });
});
