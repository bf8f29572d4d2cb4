import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { connectDevice, heartbeat, closed, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ifStarted } from '../helpers/teardown';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster presence tests skipped: ${availability.why}`);

/**
 * A device that reconnects to the other process stays online: the first process's late
 * "disconnected" does not overwrite the second's "connected", whatever order they flush in.
 * A command published on one process reaches the device on the other.
 */
describe.skipIf(!availability.ok)('presence across two processes', () => {
  let cluster: TestCluster;
  let api: ApiClient;
  let creds: DeviceCreds;

  beforeAll(async () => {
    cluster = await startTestCluster(2);
    const [n1] = cluster.nodes;
    const created = await n1!.services.accounts.create({
      name: 'Presence Co',
      quota: 10,
      budget: 100,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: `presence-${Date.now()}@example.test`,
      adminPassword: 'correct horse battery',
    });
    api = new ApiClient(n1!.httpUrl, created.apiKey);
    expect((await api.post('/api/v1/models', { name: 'LX-C' })).status).toBe(201);
    const claim = await api.post('/api/v1/devices/claim', { serials: ['CLUSTER-P1'], model: 'LX-C' });
    expect(claim.status).toBe(201);
    const d = claim.body.devices[0];
    creds = { serial: d.serial, username: d.credentials.username, password: d.credentials.password };
  });
  afterAll(async () => {
    const started = Date.now();
    await ifStarted(cluster)?.close();
    console.log(`cluster closed in ${Date.now() - started} ms`);
  });

  const flushAll = () => Promise.all(cluster.nodes.map((n) => n.ingest.flush()));
  const status = async () =>
    (await api.get('/api/v1/devices/CLUSTER-P1')).body as { status: string; connectivity: string };

  it('stays online when it moves to the other process, in either flush order', async () => {
    const [n1, n2] = cluster.nodes;
    for (const order of ['new-first', 'old-first'] as const) {
      const first = await connectDevice(n1!.mqttUrl!, creds);
      await first.publishAsync(topics.heartbeat(creds.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      await flushAll();
      expect((await status()).connectivity).toBe('online');

      const second = await connectDevice(n2!.mqttUrl!, creds);
      await second.publishAsync(topics.heartbeat(creds.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      // The takeover closes the connection on process 1 (Aedes clustering by client id).
      expect(await closed(first)).toBe(true);
      if (order === 'new-first') {
        await n2!.ingest.flush();
        await n1!.ingest.flush();
      } else {
        await n1!.ingest.flush();
        await n2!.ingest.flush();
      }
      expect(await status()).toMatchObject({ connectivity: 'online', status: 'online' });
      first.end(true);
      await second.endAsync();
      await expect
        .poll(
          async () => {
            await flushAll();
            return (await status()).connectivity;
          },
          { timeout: 5000, interval: 100 },
        )
        .toBe('offline');
    }
  });

  it('delivers a configuration change made on one process to the device on the other', async () => {
    const [, n2] = cluster.nodes;
    const device = await connectDevice(n2!.mqttUrl!, creds);
    // The configuration of the connection arrives first on subscribe; wait for the change itself.
    const got = new Promise<string>((resolve) =>
      device.on(
        'message',
        (topic, payload) =>
          topic === topics.config(creds.serial) &&
          payload.toString().includes('"dim_level":42') &&
          resolve(payload.toString()),
      ),
    );
    await device.subscribeAsync(topics.config(creds.serial), { qos: 1 });
    const patch = await api.patch('/api/v1/devices/CLUSTER-P1', { config: { dim_level: 42 } });
    expect(patch.status).toBe(200);
    const message = JSON.parse(await got) as { version: number; config: { dim_level: number } };
    expect(message.config.dim_level).toBe(42);
    await device.endAsync();
  });
});
