import { describe, it, expect, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../helpers/test-database';
import { loadConfig } from '#core/config';
import { startFleetService } from '#api/app';
import { createLogger } from '#core/logger';
import { ApiClient } from '../helpers/api-client';
import { openDatabase } from '#core/db/database';

const run = promisify(execFile);
const FLEET = path.resolve('bin/fleet.js');

async function fleet(
  db: TestDatabase,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    ...process.env,
    DATA_DIR: db.dataDir,
    ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
    ...extraEnv,
  };
  if (!db.databaseUrl) delete env.DATABASE_URL;
  try {
    const { stdout, stderr } = await run(process.execPath, [FLEET, ...args], { env });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('operator tool `fleet`', () => {
  const dbs: TestDatabase[] = [];
  afterAll(async () => {
    for (const db of dbs) await db.drop();
  });

  it(
    'creates an account whose admin key and login work on the server, and changes its quota',
    { timeout: 120_000 },
    async () => {
      const db = await createTestDatabase();
      dbs.push(db);
      const created = await fleet(db, [
        'account',
        'create',
        '--name',
        'Acme Lighting',
        '--quota',
        '5',
        '--budget',
        '100',
        '--currency',
        'EUR',
        '--unit-price',
        '2.5',
        '--admin-email',
        'ops@acme.example',
        '--admin-password',
        'a long passphrase',
        '--json',
      ]);
      expect(created.code).toBe(0);
      const out = JSON.parse(created.stdout) as { account_id: string; api_key: string; api_key_id: string };
      expect(out.account_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(out.api_key).toMatch(/^flk_/);

      const updated = await fleet(db, ['account', 'update', '--account', out.account_id, '--quota', '7', '--json']);
      expect(JSON.parse(updated.stdout).quota).toBe(7);
      const limited = await fleet(db, ['api-key', 'rate-limit', '--key', out.api_key_id, '--per-minute', '5000']);
      expect(limited.code).toBe(0);
      const viewer = await fleet(db, [
        'user',
        'create',
        '--account',
        out.account_id,
        '--email',
        'v@acme.example',
        '--password',
        'another passphrase',
        '--role',
        'viewer',
      ]);
      expect(viewer.code).toBe(0);

      const config = loadConfig({
        PORT: '0',
        MQTT_PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: db.dataDir,
        LOG_LEVEL: 'silent',
        DEMO_ACCOUNT: 'false',
        ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
      });
      const service = await startFleetService({ config, logger: createLogger('silent') });
      try {
        const api = new ApiClient(service.httpUrl, out.api_key);
        const res = await api.get('/api/v1/api-keys');
        expect(res.status).toBe(200);
        expect(res.headers.get('ratelimit-limit')).toBe('5000');
        const login = await new ApiClient(service.httpUrl).post('/api/v1/session', {
          email: 'v@acme.example',
          password: 'another passphrase',
        });
        expect(login.status).toBe(201);
        expect(login.body.user.role).toBe('viewer');

        if (!db.databaseUrl) {
          // The embedded data folder is held by the running server: a clear error, not a corruption.
          const blocked = await fleet(db, ['account', 'list']);
          expect(blocked.code).not.toBe(0);
          expect(blocked.stderr).toMatch(/in use by another running process/);
        }
      } finally {
        await service.stop();
      }
    },
  );

  it('explains missing flags and unknown commands with exit code 2', async () => {
    const db = await createTestDatabase();
    dbs.push(db);
    const missing = await fleet(db, ['account', 'create', '--name', 'x']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--quota is required');
    const unknown = await fleet(db, ['frobnicate']);
    expect(unknown.code).toBe(2);
  });

  // Three CLI processes, each starting tsx and the embedded database: 30 s ran out on two busy cores.
  it(
    'prunes by the retention settings of the environment and reports what it deleted',
    { timeout: 120_000 },
    async () => {
      const db = await createTestDatabase();
      dbs.push(db);
      expect((await fleet(db, ['migrate'])).code).toBe(0);
      // A login throttle from two days ago (no lockout running) and one from now.
      const database = await openDatabase({ databaseUrl: db.databaseUrl, dataDir: db.dataDir, poolSize: 1 });
      await database.knex('login_throttle').insert([
        { email: 'old@example.test', failures: 3, window_started_at: new Date(Date.now() - 2 * 86_400_000) },
        { email: 'new@example.test', failures: 3, window_started_at: new Date() },
      ]);
      await database.close();
      const pruned = await fleet(db, ['prune', '--json']);
      expect(pruned.code, pruned.stderr).toBe(0);
      expect(JSON.parse(pruned.stdout)).toEqual({
        deviceEvents: 0,
        events: 0,
        webhookDeliveries: 0,
        sessions: 0,
        idempotencyKeys: 0,
        loginThrottle: 1,
      });
      // HISTORY_RETENTION_DAYS and EVENT_RETENTION_DAYS come from the environment and are checked.
      const bad = await fleet(db, ['prune'], { HISTORY_RETENTION_DAYS: '-1' });
      expect(bad.code).toBe(1);
      expect(bad.stderr).toBe(
        'fleet: HISTORY_RETENTION_DAYS=-1: expected a number of days from 0 to 36500 (0 = keep forever)\n',
      );
    },
  );
});
