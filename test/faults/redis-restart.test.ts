import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { PrivateRedis, redisServerAvailable } from '../helpers/redis-server';
import { ApiClient } from '../helpers/api-client';
import { appendEvents } from '#core/events/outbox';
import { ifStarted } from '../helpers/teardown';

const availability = await clusterAvailable();
const canRun = availability.ok && redisServerAvailable();
if (!canRun) console.log(`redis restart fault test skipped: ${availability.why ?? 'redis-server is not installed'}`);

describe.skipIf(!canRun)('Redis restarted under a two-process cluster', () => {
  const redis = new PrivateRedis();
  let cluster: TestCluster;
  let apiKey: string;
  let accountId: string;

  beforeAll(async () => {
    await redis.start();
    cluster = await startTestCluster(2, { REDIS_URL: redis.url });
    const created = await cluster.nodes[0]!.services.accounts.create({
      name: 'Redis Co',
      quota: 100,
      budget: 1000,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: `redis-${Date.now()}@example.test`,
      adminPassword: 'correct horse battery',
    });
    apiKey = created.apiKey;
    accountId = created.accountId;
  });
  afterAll(async () => {
    await ifStarted(cluster)?.close();
    await redis.kill();
  });

  /** Whether an event appended on node 0 reaches node 1's bus (through Redis) within 3 s of the flush. */
  const crossProcessEvent = async (subject: string): Promise<boolean> => {
    let off = (): void => undefined;
    const seen = new Promise<boolean>((resolve) => {
      off = cluster.nodes[1]!.bus.subscribe((e) => {
        if (e.subject === subject) resolve(true);
      });
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      await cluster.nodes[0]!.database.knex.transaction((trx) =>
        appendEvents(trx, cluster.nodes[0]!.clock, [
          { accountId, type: 'device.online', subject, data: { serial: subject } },
        ]),
      );
      await cluster.nodes[0]!.outbox.settle();
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), 3000);
      });
      return await Promise.race([seen, timedOut]);
    } finally {
      clearTimeout(timer);
      off();
    }
  };

  it('keeps answering while Redis is down and heals when it is back', { timeout: 60_000 }, async () => {
    expect(await crossProcessEvent('before')).toBe(true);
    await redis.kill();
    // The API keeps working (rate limits fall back to per-process counting) and says Redis is down.
    const api = new ApiClient(cluster.nodes[0]!.httpUrl, apiKey);
    expect((await api.get('/api/v1/api-keys')).status).toBe(200);
    const ready = await new ApiClient(cluster.nodes[0]!.httpUrl).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.checks.redis.ok).toBe(false);

    await redis.start();
    await expect
      .poll(async () => (await new ApiClient(cluster.nodes[0]!.httpUrl).get('/readyz')).status, {
        timeout: 15_000,
        interval: 500,
      })
      .toBe(200);
    await expect.poll(() => crossProcessEvent(`after-${Date.now()}`), { timeout: 15_000, interval: 500 }).toBe(true);
  });

  it('stops promptly while Redis is down', { timeout: 30_000 }, async () => {
    await redis.kill();
    // Long enough for every connection to see Redis gone and wait to reconnect.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const node = cluster.nodes[1]!;
    const startedAt = Date.now();
    const stopped = await Promise.race([
      node.stop().then(() => 'stopped'),
      new Promise<string>((resolve) => setTimeout(() => resolve('still stopping after 10 s'), 10_000).unref()),
    ]);
    expect(stopped).toBe('stopped');
    console.log(`stopped in ${Date.now() - startedAt} ms with Redis down`);
  });
});
