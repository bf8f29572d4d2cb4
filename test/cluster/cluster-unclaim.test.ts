import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { connectDevice, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import type { FleetService } from '#api/app';
import { ifStarted } from '../helpers/teardown';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster unclaim tests skipped: ${availability.why}`);

/**
 * Unclaim in cluster mode, where sessions and queued messages live in Redis
 * (aedes-persistence-redis): the new owner of the serial must not receive the configuration
 * queued for the previous owner. Messages queued for an offline device carry no packet id yet,
 * so clearing them one by one finds nothing in this store; it drops the whole queue with the
 * session's last subscription, and this test keeps that true across upgrades.
 */
describe.skipIf(!availability.ok)('unclaim with the Redis session store', () => {
  let cluster: TestCluster;
  let node: FleetService;

  const account = async (name: string) => {
    const created = await node.services.accounts.create({
      name,
      quota: 10,
      budget: 100,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: `${name.toLowerCase()}-${Date.now()}@example.test`,
      adminPassword: 'correct horse battery',
    });
    const api = new ApiClient(node.httpUrl, created.apiKey);
    expect((await api.post('/api/v1/models', { name: 'LX-C' })).status).toBe(201);
    return api;
  };
  const claim = async (api: ApiClient, serial: string): Promise<DeviceCreds> => {
    const res = await api.post('/api/v1/devices/claim', { serials: [serial], model: 'LX-C' });
    expect(res.status).toBe(201);
    const d = res.body.devices[0];
    return { serial: d.serial, username: d.credentials.username, password: d.credentials.password };
  };

  beforeAll(async () => {
    cluster = await startTestCluster(1);
    node = cluster.nodes[0]!;
  });
  afterAll(async () => {
    await ifStarted(cluster)?.close();
  });

  it('the next owner gets its own configuration, never the one queued for the previous owner', async () => {
    const serial = 'CLUSTER-U1';
    const first = await account('First');
    const old = await connectDevice(node.mqttUrl!, await claim(first, serial));
    await old.subscribeAsync(topics.config(serial), { qos: 1 });
    await old.endAsync();
    // Changed twice while the device is away: queued in its persistent session in Redis.
    for (const level of [12, 13])
      expect((await first.patch(`/api/v1/devices/${serial}`, { config: { dim_level: level } })).status).toBe(200);
    expect((await first.delete(`/api/v1/devices/${serial}`)).status).toBe(204);

    const second = await account('Second');
    const creds = await claim(second, serial);
    const desired = (await second.get(`/api/v1/devices/${serial}`)).body.config;
    const dev = await connectDevice(node.mqttUrl!, creds);
    const seen: Array<{ version: number; config: Record<string, unknown> }> = [];
    dev.on('message', (topic, payload) => topic === topics.config(serial) && seen.push(JSON.parse(payload.toString())));
    await dev.subscribeAsync(topics.config(serial), { qos: 1 });
    await expect.poll(() => seen.some((m) => m.version === desired.desired_version)).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(
      seen.every((m) => m.version === desired.desired_version && m.config.dim_level === desired.desired.dim_level),
    ).toBe(true);
    await dev.endAsync();
  });
});
