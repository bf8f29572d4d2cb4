import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { MqttClient } from 'mqtt';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { connectDevice, refusalCode, type DeviceCreds } from '../helpers/mqtt';
import type { FleetService } from '../../api/src/app';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster disconnect tests skipped: ${availability.why}`);

/**
 * A device holds its MQTT connection on one process; the API call that must end it may land on
 * another. Rotation and unclaim through node 0 close the session the device holds on node 1,
 * and node 1 refuses the old credential.
 */
describe.skipIf(!availability.ok)('device sessions close on every process of a cluster', () => {
  let cluster: TestCluster;
  let node0: FleetService;
  let node1: FleetService;
  let api0: ApiClient;

  const claim = async (serial: string): Promise<DeviceCreds> => {
    const res = await api0.post('/api/v1/devices/claim', { serials: [serial], model: 'LX-D' });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return { serial, username: serial, password: res.body.devices[0].credentials.password };
  };
  const connectedToNode1 = async (creds: DeviceCreds): Promise<MqttClient> => {
    const client = await connectDevice(node1.mqttUrl!, creds);
    await expect.poll(() => node1.broker.isConnected(creds.serial)).toBe(true);
    return client;
  };

  beforeAll(async () => {
    cluster = await startTestCluster(2);
    [node0, node1] = [cluster.nodes[0]!, cluster.nodes[1]!];
    const created = await node0.services.accounts.create({
      name: 'Disconnects', quota: 100, budget: 1000, currency: 'EUR', unitPrice: 1, adminEmail: `disconnects-${Date.now()}@example.test`, adminPassword: 'correct horse battery',
    });
    api0 = new ApiClient(node0.httpUrl, created.apiKey);
    expect((await api0.post('/api/v1/models', { name: 'LX-D' })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('a credential rotation on node 0 disconnects the device connected to node 1', async () => {
    const creds = await claim('CL-ROT-1');
    const client = await connectedToNode1(creds);
    const rotated = await api0.post('/api/v1/devices/CL-ROT-1/credentials');
    expect(rotated.status).toBe(201);
    await expect.poll(() => client.connected).toBe(false);
    expect(node1.broker.isConnected('CL-ROT-1')).toBe(false);
    expect(await refusalCode(node1.mqttUrl!, creds)).toBe(4);
    await (await connectDevice(node1.mqttUrl!, { ...creds, password: rotated.body.password })).endAsync();
    await client.endAsync(true);
  });

  it('an unclaim on node 0 disconnects the device connected to node 1', async () => {
    const creds = await claim('CL-UNC-1');
    const client = await connectedToNode1(creds);
    expect((await api0.delete('/api/v1/devices/CL-UNC-1')).status).toBe(204);
    await expect.poll(() => client.connected).toBe(false);
    expect(await refusalCode(node1.mqttUrl!, creds)).toBe(4);
    await client.endAsync(true);
  });
});
