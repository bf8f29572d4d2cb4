import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { MqttClient } from 'mqtt';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { connectDevice } from '../helpers/mqtt';
import { wsClient, collect } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';
import { topics } from '#protocol/topics';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster luminaire tests skipped: ${availability.why}`);

interface Claimed {
  devices: Array<{ serial: string; credentials: { username: string; password: string } }>;
}

/**
 * docs/luminaire-data.md "Live readings": behind a load balancer the operator's browser and the
 * device are rarely on the same process. A device connected to process 1 reaches a subscriber on
 * process 2, and only a subscriber of that very device.
 */
describe.skipIf(!availability.ok)('live luminaire readings across processes', () => {
  let cluster: TestCluster;
  let apiKey: string;
  const clients: MqttClient[] = [];

  beforeAll(async () => {
    cluster = await startTestCluster(2);
    const created = await cluster.nodes[0]!.services.accounts.create({
      name: 'Lux Cluster Co',
      quota: 100,
      budget: 1000,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: `lux-cluster-${Date.now()}@example.test`,
      adminPassword: 'correct horse battery',
    });
    apiKey = created.apiKey;
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.end(true);
    await ifStarted(cluster)?.close();
  });

  it('pushes a reading stored on process 1 to the subscription on process 2, not to a watcher of another device', async () => {
    const api = new ApiClient(cluster.nodes[0]!.httpUrl, apiKey);
    expect((await api.post('/api/v1/models', { name: 'LX-C' })).status).toBe(201);
    const claim = await api.post<Claimed>('/api/v1/devices/claim', { serials: ['LUXC-1', 'LUXC-2'], model: 'LX-C' });
    expect(claim.status).toBe(201);
    const [first, second] = claim.body.devices;
    const url = `mqtt://127.0.0.1:${cluster.nodes[0]!.mqttPort}`;
    const device = await connectDevice(url, { serial: first!.serial, ...first!.credentials });
    const other = await connectDevice(url, { serial: second!.serial, ...second!.credentials });
    clients.push(device, other);

    const ws = wsClient(cluster.nodes[1]!.httpUrl, { apiKey });
    type Reading = { data: { luminaireReadings: { values: { powerW: number } } } };
    const watched = collect<Reading>(ws, 'subscription { luminaireReadings(serial: "LUXC-1") { values { powerW } } }');
    const publish = (client: MqttClient, serial: string, power: number) =>
      new Promise<void>((resolve, reject) =>
        client.publish(
          topics.luminaire(serial),
          JSON.stringify({ power_w: power, at: new Date().toISOString() }),
          { qos: 1 },
          (err) => (err ? reject(err) : resolve()),
        ),
      );
    try {
      // The subscription is set up once process 2 answered it: readings until one arrives.
      for (let i = 0; watched.items.length === 0 && i < 50; i++) {
        await publish(other, 'LUXC-2', 900);
        await publish(device, 'LUXC-1', 40 + i);
        await new Promise((r) => setTimeout(r, 100));
      }
      await watched.until(() => watched.items.length > 0);
      const powers = watched.items.map((r) => r.data.luminaireReadings.values.powerW);
      expect(powers.every((p) => p >= 40 && p < 90)).toBe(true);
    } finally {
      watched.dispose();
      await ws.dispose();
    }
    // Process 2 leaves the device's channel once nobody there watches it.
    await expect.poll(() => cluster.nodes[1]!.services.luminaireLive.size, { timeout: 5000 }).toBe(0);
  });
});
