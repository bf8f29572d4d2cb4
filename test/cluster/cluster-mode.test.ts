import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { ifStarted } from '../helpers/teardown';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster mode tests skipped: ${availability.why}`);

describe.skipIf(!availability.ok)('cluster mode (two processes on PostgreSQL and Redis)', () => {
  let cluster: TestCluster;
  let apiKey: string;

  beforeAll(async () => {
    cluster = await startTestCluster(2);
    const created = await cluster.nodes[0]!.services.accounts.create({
      name: 'Cluster Co',
      quota: 100,
      budget: 1000,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: `cluster-${Date.now()}@example.test`,
      adminPassword: 'correct horse battery',
    });
    apiKey = created.apiKey;
  });
  afterAll(async () => ifStarted(cluster)?.close());

  it('reports Redis in readiness on every process', async () => {
    for (const node of cluster.nodes) {
      const ready = await new ApiClient(node.httpUrl).get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.checks.redis.ok).toBe(true);
    }
  });

  it('counts the 100 per minute rate limit across processes', async () => {
    const clients = cluster.nodes.map((n) => new ApiClient(n.httpUrl, apiKey));
    const statuses: number[] = [];
    for (let i = 0; i < 110; i++) statuses.push((await clients[i % 2]!.get('/api/v1/api-keys')).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.slice(100).every((s) => s === 429)).toBe(true);
  });

  it('carries events from one process to subscribers on the other', async () => {
    const received: string[] = [];
    const unsubscribe = cluster.nodes[1]!.bus.subscribe((e) => {
      received.push(e.type);
    });
    const { accountId } = await cluster.nodes[0]!.database.knex('accounts').first<{ accountId: string }>(
      'id as accountId',
    );
    await cluster.nodes[0]!.services.models.register(
      { accountId, role: 'admin', principal: 'system' },
      { name: 'Cluster-Model' },
    );
    const { appendEvents } = await import('#core/events/outbox');
    await cluster.nodes[0]!.database.knex.transaction((trx) =>
      appendEvents(trx, cluster.nodes[0]!.clock, [
        { accountId, type: 'device.online', subject: 'X1', data: { serial: 'X1' } },
      ]),
    );
    await cluster.nodes[0]!.outbox.settle();
    await expect.poll(() => received.includes('device.online'), { timeout: 5000 }).toBe(true);
    unsubscribe();
  });
});
