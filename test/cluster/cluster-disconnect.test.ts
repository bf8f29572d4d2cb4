import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { MqttClient } from 'mqtt';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { connectDevice, refusalCode, type DeviceCreds } from '../helpers/mqtt';
import { makeCsr, peerCertificate } from '../helpers/certificates';
import type { FleetService } from '#api/app';
import type { DisconnectRequest } from '#core/devices/disconnect-requests';
import { ifStarted } from '../helpers/teardown';
import { topics } from '#protocol/topics';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster disconnect tests skipped: ${availability.why}`);

/**
 * A device holds its MQTT connection on one process; the API call that must end it may land on
 * another. Rotation, unclaim and certificate revocation through node 0 close the session the
 * device holds on node 1, and node 1 refuses the old credential.
 */
describe.skipIf(!availability.ok)('device sessions close on every process of a cluster', () => {
  let cluster: TestCluster;
  let node0: FleetService;
  let node1: FleetService;
  let api0: ApiClient;
  let api1: ApiClient;

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
      name: 'Disconnects',
      quota: 100,
      budget: 1000,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: `disconnects-${Date.now()}@example.test`,
      adminPassword: 'correct horse battery',
    });
    api0 = new ApiClient(node0.httpUrl, created.apiKey);
    api1 = new ApiClient(node1.httpUrl, created.apiKey);
    expect((await api0.post('/api/v1/models', { name: 'LX-D' })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await ifStarted(cluster)?.close();
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

  it('a planned rotation through node 0 is delivered to the device connected to node 1, which stays connected', async () => {
    const creds = await claim('CL-INB-1');
    const client = await connectedToNode1(creds);
    await client.subscribeAsync(topics.credentials(creds.serial), { qos: 1 });
    const delivered = new Promise<{ password: string; rotation_id: string }>((resolve) =>
      client.on('message', (topic, payload) => {
        if (topic === topics.credentials(creds.serial)) resolve(JSON.parse(payload.toString()));
      }),
    );
    const started = await api0.post('/api/v1/devices/CL-INB-1/credentials', { mode: 'in_band' });
    expect(started.status).toBe(202);
    const message = await delivered;
    expect(message.rotation_id).toBe(started.body.rotation.id);
    expect(client.connected).toBe(true);
    expect(node1.broker.isConnected(creds.serial)).toBe(true);
    await client.endAsync();
    // The old password works on either node until the device confirms, here by connecting with the new one.
    expect(await refusalCode(node0.mqttUrl!, creds)).toBe(0);
    expect(await refusalCode(node0.mqttUrl!, { ...creds, password: message.password })).toBe(0);
    await expect.poll(() => refusalCode(node1.mqttUrl!, creds)).toBe(4);
  });

  it('an unclaim on node 0 disconnects the device connected to node 1', async () => {
    const creds = await claim('CL-UNC-1');
    const client = await connectedToNode1(creds);
    expect((await api0.delete('/api/v1/devices/CL-UNC-1')).status).toBe(204);
    await expect.poll(() => client.connected).toBe(false);
    // Not claimed any more: 5 (not authorized).
    expect(await refusalCode(node1.mqttUrl!, creds)).toBe(5);
    await client.endAsync(true);
  });

  it('every node uses the same device CA; a certificate revoked through node 0 is refused by node 1, which closes its sessions', async () => {
    const ca0 = (await api0.get('/api/v1/device-ca')).body as string;
    const ca1 = (await api1.get('/api/v1/device-ca')).body as string;
    expect(ca0).toContain('BEGIN CERTIFICATE');
    expect(ca1).toBe(ca0);
    expect((await node1.services.certificates.deviceCa()).pem).toBe(ca0);

    const creds = await claim('CL-CERT-1');
    const issued = await api0.post('/api/v1/devices/CL-CERT-1/certificates', { csr: (await makeCsr()).pem });
    expect(issued.status, JSON.stringify(issued.body)).toBe(201);
    const certificate = peerCertificate(issued.body.certificate);
    expect(
      (
        await node1.services.deviceAuth.authenticateCertificate({
          clientId: 'CL-CERT-1',
          username: undefined,
          certificate,
        })
      ).ok,
    ).toBe(true);

    // What node 1's broker is asked to close, whichever process asked.
    const closes: DisconnectRequest[] = [];
    const closeSessions = node1.broker.closeSessions.bind(node1.broker);
    node1.broker.closeSessions = (request) => {
      closes.push(request);
      closeSessions(request);
    };
    try {
      // A password session of the same device is not the revoked certificate's: it stays.
      const client = await connectedToNode1(creds);
      const revoked = await api0.delete(`/api/v1/devices/CL-CERT-1/certificates/${issued.body.fingerprint_sha256}`);
      expect(revoked.status).toBe(200);
      expect(
        await node1.services.deviceAuth.authenticateCertificate({
          clientId: 'CL-CERT-1',
          username: undefined,
          certificate,
        }),
      ).toEqual({ ok: false, reason: 'certificate_revoked' });
      await expect
        .poll(() => closes)
        .toContainEqual({
          serial: 'CL-CERT-1',
          reason: 'certificate revoked',
          certificateFingerprint: issued.body.fingerprint_sha256,
        });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(client.connected).toBe(true);
      await client.endAsync();
    } finally {
      delete (node1.broker as unknown as Record<string, unknown>).closeSessions;
    }
  });
});
