import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { collect, connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { claimWithCredentials, sha256, uploadFirmware, waitFor } from './ota-helpers';
import { randomBytes } from 'node:crypto';
import { ifStarted } from '../helpers/teardown';

/** Firmware downloads through signed per-device links: ranges, ETag, expiry, tampering, foreign links. */
describe('firmware downloads', () => {
  let server: TestServer;
  let a: TestAccount;
  const bytes = randomBytes(300_000);
  const clients: MqttClient[] = [];
  const commands: Record<string, { job_id: string; url: string; sha256: string; size: number }> = {};

  beforeAll(async () => {
    server = await startTestServer({ env: { PUBLIC_URL: 'http://devices.example.test:9999' } });
    a = await server.createAccount();
    await buildModel(a, 'LX-200');
    await uploadFirmware(a, { model: 'LX-200', version: '2.0.0', bytes, expectStatus: 201 });
    const creds = await claimWithCredentials(a, { serials: ['DL-1', 'DL-2'], model: 'LX-200' });
    for (const c of creds) {
      const client = await connectDevice(server.service.mqttUrl!, c);
      clients.push(client);
      const seen = collect(client);
      await client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
      await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      Object.defineProperty(commands, c.serial, {
        get: () => JSON.parse(seen.find((m) => m.topic === topics.ota(c.serial))?.payload ?? 'null'),
        enumerable: true,
      });
    }
    await waitFor(async () => (await a.api.get('/api/v1/devices?firmware=1.0.0&limit=10')).body.devices.length === 2);
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', serials: ['DL-1', 'DL-2'] });
    expect(res.status).toBe(202);
    await waitFor(() => Boolean(commands['DL-1'] && commands['DL-2']));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  /** The link as published uses PUBLIC_URL; the test reaches the same path on the bound port. */
  const local = (url: string) => {
    expect(url.startsWith('http://devices.example.test:9999/firmware/download/')).toBe(true);
    const u = new URL(url);
    return `${server.service.httpUrl}${u.pathname}${u.search}`;
  };

  it('serves the whole file with Content-Length, a strong ETag and Accept-Ranges, and closes the connection; the sha256 matches the command', async () => {
    const cmd = commands['DL-1']!;
    expect(cmd).toMatchObject({ size: 300_000, sha256: sha256(bytes) });
    const res = await fetch(local(cmd.url));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe('300000');
    expect(res.headers.get('etag')).toBe(`"sha256-${sha256(bytes)}"`);
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    // One download per update: no idle keep-alive socket per device (docs/ota.md "Downloads").
    expect(res.headers.get('connection')).toBe('close');
    const body = Buffer.from(await res.arrayBuffer());
    expect(sha256(body)).toBe(cmd.sha256);
  });

  it('resumes with Range: 206 with Content-Range; a range past the end is 416', async () => {
    const url = local(commands['DL-1']!.url);
    const part = await fetch(url, { headers: { Range: 'bytes=100000-' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 100000-299999/300000');
    expect(part.headers.get('content-length')).toBe('200000');
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(100000))).toBe(true);
    const middle = await fetch(url, { headers: { Range: 'bytes=10-19' } });
    expect(Buffer.from(await middle.arrayBuffer()).equals(bytes.subarray(10, 20))).toBe(true);
    const suffix = await fetch(url, { headers: { Range: 'bytes=-5' } });
    expect(Buffer.from(await suffix.arrayBuffer()).equals(bytes.subarray(299995))).toBe(true);
    const past = await fetch(url, { headers: { Range: 'bytes=300000-' } });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe('bytes */300000');
    // If-Range with another validator: the whole file, not a mix of two versions.
    const stale = await fetch(url, { headers: { Range: 'bytes=0-9', 'If-Range': '"sha256-other"' } });
    expect(stale.status).toBe(200);
    await stale.arrayBuffer();
  });

  it('refuses tampered and foreign links with 403 and expired links with 410', async () => {
    const url = new URL(local(commands['DL-1']!.url));
    const sig = url.searchParams.get('s')!;
    const tampered = new URL(url);
    tampered.searchParams.set('s', (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1));
    expect((await fetch(tampered)).status).toBe(403);
    const longer = new URL(url);
    longer.searchParams.set('e', String(Number(url.searchParams.get('e')) + 3600));
    expect((await fetch(longer)).status).toBe(403);
    // DL-1's signature on DL-2's job.
    const foreign = new URL(local(commands['DL-2']!.url));
    foreign.searchParams.set('s', sig);
    foreign.searchParams.set('e', url.searchParams.get('e')!);
    const res = await fetch(foreign);
    expect(res.status).toBe(403);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    // A correctly signed link whose time is up.
    const update = (await server.service.database
      .knex('device_updates')
      .where({ id: commands['DL-2']!.job_id })
      .first()) as { id: string; device_id: string; firmware_version_id: string };
    const expiresAt = Math.floor(Date.now() / 1000) - 1;
    const expired = server.service.services.downloadLinks.url(server.service.httpUrl, {
      jobId: update.id,
      deviceId: update.device_id,
      firmwareVersionId: update.firmware_version_id,
      expiresAt,
    });
    const gone = await fetch(expired);
    expect(gone.status).toBe(410);
    expect((await gone.json()).code).toBe('gone');
    expect((await fetch(`${server.service.httpUrl}/firmware/download/not-a-job?e=1&s=x`)).status).toBe(403);
  });

  it("a finished job's link stops working", async () => {
    const c = clients[0]!;
    await c.publishAsync(topics.heartbeat('DL-1'), heartbeat({ firmware: '2.0.0' }), { qos: 1 });
    await expect
      .poll(
        async () =>
          (await server.service.database.knex('device_updates').where({ id: commands['DL-1']!.job_id }).first('state'))
            .state,
      )
      .toBe('succeeded');
    expect((await fetch(local(commands['DL-1']!.url))).status).toBe(410);
  });
});
