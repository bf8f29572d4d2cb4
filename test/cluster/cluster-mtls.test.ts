import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { ApiClient } from '../helpers/api-client';
import { ifStarted } from '../helpers/teardown';
import { heartbeat } from '../helpers/mqtt';
import { makeCsr, writeServerCertificate } from '../helpers/certificates';
import { topics } from '#protocol/topics';
import type { FleetService } from '#api/app';

const availability = await clusterAvailable();
if (!availability.ok) console.log(`cluster mutual TLS tests skipped: ${availability.why}`);

/**
 * Two processes serving TLS with one device CA: a device holds a certificate session on node 1's
 * MQTTS listener, and its certificate is revoked through node 0's HTTPS API. The session on
 * node 1 closes at once and node 1 refuses the certificate from then on.
 */
describe.skipIf(!availability.ok)('device certificates across a TLS cluster', () => {
  let cluster: TestCluster;
  let node0: FleetService;
  let node1: FleetService;
  let api0: ApiClient;
  let dir: string;
  let serverCa: string;

  const connectByCertificate = (input: { url: string; serial: string; key: string; cert: string }) =>
    new Promise<{ code: number; client?: MqttClient }>((resolve) => {
      const client = mqtt.connect(input.url, {
        key: input.key,
        cert: input.cert,
        ca: serverCa,
        clientId: input.serial,
        clean: false,
        reconnectPeriod: 0,
        connectTimeout: 5000,
      });
      client.once('connect', () => resolve({ code: 0, client }));
      client.once('error', (err) => {
        client.end(true);
        resolve({ code: (err as { code?: number }).code ?? -1 });
      });
    });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'fleet-cluster-mtls-'));
    const files = await writeServerCertificate(dir);
    serverCa = files.caPem;
    cluster = await startTestCluster(2, {
      TLS_CERT_FILE: files.certFile,
      TLS_KEY_FILE: files.keyFile,
      MQTTS_PORT: '0',
    });
    [node0, node1] = [cluster.nodes[0]!, cluster.nodes[1]!];
    const created = await node0.services.accounts.create({
      name: 'Cluster mTLS',
      quota: 10,
      budget: 100,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: `cluster-mtls-${Date.now()}@example.test`,
      adminPassword: 'correct horse battery',
    });
    api0 = new ApiClient(node0.httpUrl, created.apiKey, serverCa);
    expect(node0.httpUrl).toMatch(/^https:/);
    expect((await api0.post('/api/v1/models', { name: 'LX-M' })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await ifStarted(cluster)?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('revoking through node 0 closes the certificate session held on node 1, and node 1 refuses it from then on', async () => {
    expect((await api0.post('/api/v1/devices/claim', { serials: ['CL-MTLS-1'], model: 'LX-M' })).status).toBe(201);
    const csr = await makeCsr();
    const issued = await api0.post('/api/v1/devices/CL-MTLS-1/certificates', { csr: csr.pem });
    expect(issued.status, JSON.stringify(issued.body)).toBe(201);
    const device = { url: node1.mqttsUrl!, serial: 'CL-MTLS-1', key: csr.privateKeyPem, cert: issued.body.certificate };

    const { code, client } = await connectByCertificate(device);
    expect(code).toBe(0);
    await client!.publishAsync(topics.heartbeat('CL-MTLS-1'), heartbeat(), { qos: 1 });
    await expect.poll(async () => (await api0.get('/api/v1/devices/CL-MTLS-1')).body.status).toBe('online');

    const revoked = await api0.delete(`/api/v1/devices/CL-MTLS-1/certificates/${issued.body.fingerprint_sha256}`);
    expect(revoked.status).toBe(200);
    await expect.poll(() => client!.connected).toBe(false);
    expect(node1.broker.isConnected('CL-MTLS-1')).toBe(false);
    expect((await connectByCertificate(device)).code).toBe(4);
    expect((await connectByCertificate({ ...device, url: node0.mqttsUrl! })).code).toBe(4);
    client!.end(true);
  });
});
