import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '#core/db/database';
import { ensurePortalBuilt } from '../e2e/browser';

/**
 * vitest's global setup. The portal is built first when it is missing or stale: test files that
 * serve it (TLS, the static portal, the browser) ran beside the one building it, and one got the
 * 503 "not built yet" page while vite had emptied portal/dist.
 *
 * Then one embedded database (PGlite) migrated once per run, which every test
 * database copies instead of creating its own. PGlite's initdb and the migrations took 2.0 to
 * 2.5 s per test server on these two cores; copying the migrated folder and opening it takes
 * 0.3 s. The template's folder reaches the test workers through FLEET_TEST_PGLITE_TEMPLATE; a
 * run without it (a test file started some other way) creates each database from scratch.
 */
export const TEMPLATE_ENV = 'FLEET_TEST_PGLITE_TEMPLATE';

export default async function setup(): Promise<() => Promise<void>> {
  ensurePortalBuilt();
  if (process.env.TEST_DATABASE_URL) return () => Promise.resolve();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-test-template-'));
  const database = await openDatabase({ dataDir: dir });
  try {
    await database.migrate();
  } finally {
    await database.close();
  }
  process.env[TEMPLATE_ENV] = dir;
  return async () => {
    delete process.env.FLEET_TEST_PGLITE_TEMPLATE;
    await fs.promises.rm(dir, { recursive: true, force: true });
  };
}
