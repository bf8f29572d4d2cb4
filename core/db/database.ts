import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { createPgConfig } from '@electric-sql/pglite/node-postgres';
import { migrationSource } from '#migrations/index';
import { acquireDataDirLock, type DataDirLock } from './data-dir-lock';
import { EmbeddedDatabaseThread } from './pglite-worker-client';
import type { Logger } from '../logger';
import { ConfigurationError, settingError } from '../config';

function knexLog(logger: Logger) {
  return {
    warn: (message: unknown) => logger.warn({ knex: String(message) }, 'knex warning'),
    error: (message: unknown) => logger.error({ knex: String(message) }, 'knex error'),
    deprecate: (message: unknown) => logger.debug({ knex: String(message) }, 'knex deprecation'),
    debug: (message: unknown) => logger.debug({ knex: String(message) }, 'knex debug'),
  };
}

// node-postgres returns int8 and numeric as strings; our bigints (money in minor units, ids of
// history rows) stay far below 2^53, so parse them as numbers once, here.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type DatabaseKind = 'postgres' | 'embedded';

export interface Database {
  readonly knex: Knex;
  /**
   * Connections for statements prepared by preparedRaw (core/db/prepared.ts) that keep one plan
   * for every value: each opens with `plan_cache_mode = force_generic_plan`. Only
   * statements whose plan without values suits every value may run here (the device list's
   * pages): every statement with values is planned without them on these connections, an unnamed
   * one too (preparedRaw sends one past its limit of names), only then each time. On the
   * embedded database, which has one connection, this is `knex`.
   */
  readonly plannedOnce: Knex;
  readonly kind: DatabaseKind;
  /** Runs pending migrations; returns the names applied. */
  migrate(): Promise<string[]>;
  /** Whether the database answers now (core/db/database-health.ts probes with it). */
  probe(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** PostgreSQL URL; unset = embedded PGlite in `dataDir`/pglite. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** Connections to PostgreSQL (ignored for the embedded database, which has one). Default 10. */
  poolSize?: number;
  /** Where knex's own warnings go (instead of the console). */
  logger?: Logger;
  /**
   * Where the embedded database runs: `worker` (default), a thread of its own, so its queries
   * never block the event loop; `main`, the event loop's thread (EMBEDDED_DATABASE_THREAD).
   */
  embeddedThread?: EmbeddedThread;
}

export type EmbeddedThread = 'worker' | 'main';

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    // With the list connections' startup option: a server or pooler that refuses it fails the start here.
    await probePostgres(options.databaseUrl, withStartupSetting(options.databaseUrl, GENERIC_PLANS));
    return openPostgres(options.databaseUrl, options.poolSize ?? 10, options.logger);
  }
  return openEmbedded(options.dataDir, options.embeddedThread ?? 'worker', options.logger);
}

/**
 * One connection before the pool exists: a DATABASE_URL that cannot connect (wrong host, port,
 * password, database) fails with one line that names it, its password masked, instead of knex's
 * "Acquire connection error" warning with a stack trace followed by the driver's bare message.
 */
async function probePostgres(url: string, connectWith: { connectionString: string; options?: string }): Promise<void> {
  const client = new pg.Client({ ...connectWith, connectionTimeoutMillis: 10_000 });
  // An error after connect (the server going away) must not become an unhandled 'error' event.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    throw new ConfigurationError([
      settingError(
        'DATABASE_URL',
        url,
        `cannot connect (${(error as Error).message}); expected a PostgreSQL server that accepts this URL`,
      ),
    ]);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function withMigrations(
  knex: Knex,
  kind: DatabaseKind,
  close: () => Promise<void>,
  probe: () => Promise<void> = async () => {
    await knex.raw('select 1');
  },
  plannedOnce: Knex = knex,
): Database {
  return {
    knex,
    plannedOnce,
    kind,
    probe,
    async migrate() {
      const [, applied] = (await knex.migrate.latest({ migrationSource })) as [number, string[]];
      return applied;
    },
    close,
  };
}

function openPostgres(url: string, poolSize: number, logger: Logger | undefined): Database {
  const knex = knexFactory({
    ...(logger ? { log: knexLog(logger) } : {}),
    client: 'pg',
    connection: url,
    // PostgreSQL's own choice of plan for named statements (plan_cache_mode = auto): after five
    // runs it keeps a generic plan only when that plan is estimated as cheap as planning with the
    // values. Statements whose every plan suits every value say so by running on `plannedOnce`.
    pool: { min: 0, max: poolSize },
    acquireConnectionTimeout: 10_000,
  });
  // The device list's page statements: PostgreSQL estimated their generic plans as dearer than
  // planning each page with its values (the values make the LIMIT look cheaper), so under `auto`
  // it planned every page again: 0.8-1.2 ms of a page's 1.9-2.6 ms of PostgreSQL CPU for 100
  // devices of 100,000 (bench/devices-list.bench.ts). Half the pool's size: lists get their
  // own connections without doubling what a process may hold.
  const plannedOnce = knexFactory({
    ...(logger ? { log: knexLog(logger) } : {}),
    client: 'pg',
    // A startup option rather than a SET after connecting: a connection without the setting
    // never exists, so none can join the pool after a SET that failed.
    connection: withStartupSetting(url, GENERIC_PLANS),
    pool: { min: 0, max: Math.max(1, Math.ceil(poolSize / 2)) },
    acquireConnectionTimeout: 10_000,
  });
  return withMigrations(
    knex,
    'postgres',
    async () => {
      await Promise.all([knex.destroy(), plannedOnce.destroy()]);
    },
    undefined,
    plannedOnce,
  );
}

/** What the list's connections (Database.plannedOnce) start with. */
const GENERIC_PLANS = 'plan_cache_mode=force_generic_plan';

/**
 * The URL's connections with `-c setting` added to the options they start with (the URL's own
 * kept). The URL is passed as written: node-postgres reads a password such as `50%off` as it
 * always did, which a URL rebuilt here would change. Only a URL with options of its own is
 * rewritten, since node-postgres takes the URL's options over the config's.
 */
export function withStartupSetting(url: string, setting: string): { connectionString: string; options?: string } {
  const parsed = new URL(url);
  const own = parsed.searchParams.get('options');
  if (own === null) return { connectionString: url, options: `-c ${setting}` };
  parsed.searchParams.set('options', `${own} -c ${setting}`);
  return { connectionString: parsed.toString() };
}

async function openEmbedded(dataDir: string, thread: EmbeddedThread, logger: Logger | undefined): Promise<Database> {
  fs.mkdirSync(dataDir, { recursive: true });
  // The lock stays with this process whichever thread runs PGlite: it is the process that owns the files.
  const lock: DataDirLock = acquireDataDirLock(dataDir);
  let opened: { pgConfig(): object; close(): Promise<void>; ping?(): Promise<void> };
  try {
    opened =
      thread === 'worker'
        ? await EmbeddedDatabaseThread.open(path.join(dataDir, 'pglite'), logger)
        : inMainThread(await PGlite.create(path.join(dataDir, 'pglite')));
  } catch (error) {
    lock.release();
    throw error;
  }
  const knex = knexFactory({
    ...(logger ? { log: knexLog(logger) } : {}),
    client: 'pg',
    connection: () => opened.pgConfig() as Knex.PgConnectionConfig,
    // PGlite is a single connection: inside a transaction, use the transaction object only.
    pool: { min: 1, max: 1 },
    acquireConnectionTimeout: 60_000,
  });
  return withMigrations(
    knex,
    'embedded',
    async () => {
      try {
        await knex.destroy();
        await opened.close();
      } finally {
        lock.release();
      }
    },
    opened.ping ? () => opened.ping!() : undefined,
  );
}

function inMainThread(pglite: PGlite): { pgConfig(): object; close(): Promise<void> } {
  return { pgConfig: () => createPgConfig(pglite), close: () => pglite.close() };
}
