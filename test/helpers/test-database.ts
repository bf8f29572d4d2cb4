import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDatabase, type Database } from '#core/db/database';
import { TEMPLATE_ENV } from './global-setup';

/**
 * An isolated database per test server: a fresh PostgreSQL database on TEST_DATABASE_URL when
 * set, otherwise an embedded PGlite in a new temporary folder. Tests never see each other's rows.
 */
export interface TestDatabase {
  /** Set when on PostgreSQL. */
  databaseUrl: string | undefined;
  dataDir: string;
  drop(): Promise<void>;
}

export const usingPostgres = (): boolean => Boolean(process.env.TEST_DATABASE_URL);

/** EMBEDDED_DATABASE_THREAD of the test run (`main` runs a suite the old way), passed to the servers it starts. */
export function embeddedThreadEnv(): { EMBEDDED_DATABASE_THREAD?: string } {
  const thread = process.env.EMBEDDED_DATABASE_THREAD;
  return thread ? { EMBEDDED_DATABASE_THREAD: thread } : {};
}

export const testEmbeddedThread = (): 'worker' | 'main' =>
  process.env.EMBEDDED_DATABASE_THREAD === 'main' ? 'main' : 'worker';

/**
 * Retried: a file the stopped service was still closing (a firmware temp file, the embedded
 * database's last write from its thread) can land while the folder is being removed, and the
 * removal then fails with ENOTEMPTY although the test passed (seen in CI, once in three runs).
 */
const REMOVE_DATA_DIR = { recursive: true, force: true, maxRetries: 5, retryDelay: 100 } as const;

export async function createTestDatabase(): Promise<TestDatabase> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-test-'));
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    // A copy of the run's migrated embedded database (global-setup.ts), when there is one.
    const template = process.env[TEMPLATE_ENV];
    if (template) await fs.promises.cp(template, dataDir, { recursive: true });
    return { databaseUrl: undefined, dataDir, drop: () => fs.promises.rm(dataDir, REMOVE_DATA_DIR) };
  }
  const name = `fleet_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    databaseUrl: url.toString(),
    dataDir,
    drop: async () => {
      fs.rmSync(dataDir, REMOVE_DATA_DIR);
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

/** A test database of its own, migrated and open: for tests of statements, without services or a server. */
export interface OpenTestDatabase {
  database: Database;
  /** Closes the pool, then drops the database. */
  close(): Promise<void>;
}

/** createTestDatabase, opened (a pool of 2 on PostgreSQL) and migrated; dropped again if that fails. */
export async function openTestDatabase(): Promise<OpenTestDatabase> {
  const testDb = await createTestDatabase();
  let database: Database | undefined;
  try {
    database = await openDatabase({
      databaseUrl: testDb.databaseUrl,
      dataDir: testDb.dataDir,
      poolSize: 2,
      embeddedThread: testEmbeddedThread(),
    });
    await database.migrate();
  } catch (error) {
    await database?.close();
    await testDb.drop();
    throw error;
  }
  const opened = database;
  return {
    database: opened,
    close: async () => {
      await opened.close();
      await testDb.drop();
    },
  };
}
