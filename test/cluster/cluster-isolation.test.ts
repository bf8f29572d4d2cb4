import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { MqttClient } from 'mqtt';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { collect, connectDevice, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import type { FleetService } from '#api/app';
import { ifStarted } from '../helpers/teardown';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster isolation tests skipped: ${availability.why}`);

/**
 * Isolation between accounts with the Redis session store (aedes-persistence-redis), whose
 * subscriptions every process matches offline messages against: a denied filter is never
 * stored there, and filters stored by an earlier version are removed when a process starts.
 */
describe.skipIf(!availability.ok)('MQTT isolation with the Redis session store', () => {
  let cluster: TestCluster;
  let node: FleetService;
  let a: ApiClient;
  let b: ApiClient;

  type Store = {
    addSubscriptions(c: { id: string }, s: Array<{ topic: string; qos: number }>): Promise<void>;
    subscriptionsByClient(c: { id: string }): Promise<Array<{ topic: string; qos: number }> | null>;
  };
  const store = (n: FleetService) => (n.broker as unknown as { aedes: { persistence: Store } }).aedes.persistence;
  const stored = async (n: FleetService, serial: string) =>
    ((await store(n).subscriptionsByClient({ id: serial })) ?? []).map((s) => `${s.topic}@${s.qos}`).sort();

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
    expect((await api.post('/api/v1/models', { name: 'LX-I' })).status).toBe(201);
    return api;
  };
  const claim = async (api: ApiClient, serial: string): Promise<DeviceCreds> => {
    const res = await api.post('/api/v1/devices/claim', { serials: [serial], model: 'LX-I' });
    expect(res.status).toBe(201);
    const d = res.body.devices[0];
    return { serial: d.serial, username: d.credentials.username, password: d.credentials.password };
  };
  const suback = (client: MqttClient, filters: string[], qos: 1 | 2) =>
    new Promise<number[]>((resolve) => {
      client.on('packetreceive', (p) => p.cmd === 'suback' && resolve(p.granted as number[]));
      client.subscribe(filters, { qos }, () => undefined);
    });

  beforeAll(async () => {
    cluster = await startTestCluster(1);
    node = cluster.nodes[0]!;
    a = await account('Alpha');
    b = await account('Beta');
  });
  afterAll(async () => {
    await ifStarted(cluster)?.close();
  });

  it('stores only the allowed filters of a mixed SUBSCRIBE, at QoS 1', async () => {
    const evil = await claim(a, 'ISO-MIXED');
    const client = await connectDevice(node.mqttUrl!, evil);
    expect(await suback(client, ['#', 'devices/+/config', topics.ota(evil.serial)], 2)).toEqual([128, 128, 1]);
    await client.endAsync();
    expect(await stored(node, evil.serial)).toEqual([`${topics.ota(evil.serial)}@1`]);
  });

  it('a process that starts removes foreign filters stored before, and nothing of another account reaches the device', async () => {
    const evil = await claim(a, 'ISO-OLD');
    const other = await claim(b, 'ISO-VICTIM');
    const first = await connectDevice(node.mqttUrl!, evil);
    await first.subscribeAsync(topics.ota(evil.serial), { qos: 1 });
    await first.endAsync();
    // What Aedes 1.2 stored before the guard: straight into Redis, past the guarded store.
    const unguarded = Object.getPrototypeOf(store(node)) as Store;
    await unguarded.addSubscriptions.call(store(node), { id: evil.serial }, [
      { topic: '#', qos: 1 },
      { topic: topics.config(evil.serial), qos: 2 },
    ]);
    expect(await stored(node, evil.serial)).toEqual([
      '#@1',
      `${topics.config(evil.serial)}@2`,
      `${topics.ota(evil.serial)}@1`,
    ]);

    const joined = await cluster.addNode();
    expect(await stored(joined, evil.serial)).toEqual([
      `${topics.config(evil.serial)}@1`,
      `${topics.ota(evil.serial)}@1`,
    ]);

    expect((await b.patch(`/api/v1/devices/${other.serial}`, { config: { dim_level: 21 } })).status).toBe(200);
    const again = await connectDevice(joined.mqttUrl!, evil);
    const seen = collect(again);
    expect((await b.patch(`/api/v1/devices/${other.serial}`, { config: { dim_level: 22 } })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1500));
    expect(seen.filter((m) => !m.topic.startsWith(`devices/${evil.serial}/`))).toEqual([]);
    await again.endAsync();
  });
});
