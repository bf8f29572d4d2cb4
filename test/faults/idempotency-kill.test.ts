import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../helpers/test-database';
import { ServiceProcess } from '../helpers/service-process';
import { ApiClient, type ApiResponse } from '../helpers/api-client';
import { serials } from '../helpers/factories';
import { openDatabase } from '#core/db/database';
import { sha256Hex } from '#core/shared/secrets';
import { ifStarted } from '../helpers/teardown';
import { createAccountWithCli } from '../helpers/operator-cli';

const CLAIMS = 40;
const PER_CLAIM = 100;
const KILL_AFTER_ANSWERS = 3;
const KILL_DELAY_MS = 40;

interface ClaimBody {
  devices: Array<{ serial: string; credentials: { password: string } }>;
}

/**
 * kill -9 of the service while 40 idempotent claims are in flight. A production line that
 * retries with the same keys must learn every outcome: a claim that committed is answered
 * with its stored response (same passwords), one that did not is claimed now, and no key is
 * left blocking its retries (409) after the process that held it is gone.
 */
describe('idempotent claims across a kill -9', () => {
  let db: TestDatabase;
  let node: ServiceProcess;
  let api: ApiClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    const env = { DATA_DIR: db.dataDir, ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}) };
    const account = await createAccountWithCli(env, {
      name: 'Crash Co',
      quota: 5000,
      budget: 100000,
      perMinute: 10000,
    });
    node = new ServiceProcess({ ...env, FLEET_SECRET: randomBytes(32).toString('hex') });
    await node.start();
    api = new ApiClient(node.httpUrl, account.api_key);
    expect((await api.post('/api/v1/models', { name: 'LX-K' })).status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await ifStarted(node)?.stop();
    await ifStarted(db)?.drop();
  }, 60_000);

  it('answers every retry with the committed claim or a new one, never 409', { timeout: 180_000 }, async () => {
    const requests = Array.from({ length: CLAIMS }, (_, i) => ({
      key: `line3-crash-${String(i).padStart(3, '0')}`,
      body: { serials: serials(`CRASH${i}`, PER_CLAIM), model: 'LX-K' },
    }));
    const answered = new Map<string, ApiResponse<ClaimBody>>();
    // A few answers, then a moment into the next claims. On PostgreSQL the claims run side by
    // side (taking turns at the account lock); the embedded database runs one request's
    // statements at a time, so the kill lands inside the claim it is running then.
    let enoughAnswered: () => void = () => undefined;
    const killPoint = new Promise<void>((resolve) => (enoughAnswered = resolve));
    const inFlight = requests.map(async (r) => {
      try {
        const res = await api.post<ClaimBody>('/api/v1/devices/claim', r.body, { 'Idempotency-Key': r.key });
        answered.set(r.key, res);
        if (answered.size >= KILL_AFTER_ANSWERS) enoughAnswered();
      } catch {
        // the process died under this request
      }
    });
    await killPoint;
    await new Promise((resolve) => setTimeout(resolve, KILL_DELAY_MS));
    await node.kill();
    await Promise.all(inFlight);
    const unanswered = requests.filter((r) => !answered.has(r.key));
    expect(unanswered.length, 'the kill came too late to leave claims in flight').toBeGreaterThan(0);
    for (const res of answered.values()) expect(res.status).toBe(201);

    await node.start();
    const retries = new Map<string, ApiResponse<ClaimBody>>();
    for (const r of requests)
      retries.set(r.key, await api.post<ClaimBody>('/api/v1/devices/claim', r.body, { 'Idempotency-Key': r.key }));
    const statuses = [...retries.values()].map((res) =>
      `${res.status} ${(res.body as { code?: string }).code ?? ''}`.trim(),
    );
    expect(statuses).toEqual(requests.map(() => '201'));
    for (const [key, before] of answered) {
      const retry = retries.get(key)!;
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.body).toEqual(before.body);
    }
    const total = await api.get<{ total: number }>('/api/v1/devices?limit=1');
    expect(total.body.total).toBe(CLAIMS * PER_CLAIM);

    // The passwords the line got are the ones the devices can log in with.
    await node.stop();
    const database = await openDatabase({ databaseUrl: db.databaseUrl, dataDir: db.dataDir, poolSize: 1 });
    try {
      const rows = await database
        .knex('devices as d')
        .join('device_credentials as c', 'c.device_id', 'd.id')
        .select<Array<{ serial: string; secret_hash: string }>>('d.serial', 'c.secret_hash');
      const hashes = new Map(rows.map((row) => [row.serial, row.secret_hash]));
      for (const retry of retries.values()) {
        for (const device of retry.body.devices)
          expect(hashes.get(device.serial)).toBe(sha256Hex(device.credentials.password));
      }
    } finally {
      await database.close();
    }
  });
});
