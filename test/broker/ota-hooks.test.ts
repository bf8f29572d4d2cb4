import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import mqtt from 'mqtt';
import { claimForMqtt, connectDevice, deviceOptions, heartbeat, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import type { OtaDeviceListener } from '#core/devices/device-gateway';
import { listenInsteadOfOtaEngine } from '../helpers/stand-ins';
import { ifStarted } from '../helpers/teardown';

/** The hooks the OTA engine plugs into: device ready and heard, progress reports, firmware reports; and OTA delivery. */
describe('OTA hooks of the broker', () => {
  let server: TestServer;
  let account: TestAccount;
  let creds: DeviceCreds;
  const calls: Array<{ kind: string; input: unknown }> = [];
  const record = (kind: string) => (input: unknown) => {
    calls.push({ kind, input });
    return Promise.resolve();
  };
  const listener: OtaDeviceListener = {
    onDeviceReady: record('ready'),
    onDeviceHeard: record('heard'),
    onProgress: record('progress'),
    onFirmwareReported: record('firmware'),
  };

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    [creds] = (await claimForMqtt(server, account, ['OTA-1'])) as [DeviceCreds];
    listenInsteadOfOtaEngine(server.service.services.ota, listener);
    // Generous: the embedded database starts slowly on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it('reports the device ready once it subscribed to its ota topic, and again when a persistent session is restored', async () => {
    const dev = await connectDevice(server.service.mqttUrl!, creds);
    await expect.poll(() => server.service.services.gateway.isConnected('OTA-1')).toBe(true);
    expect(calls.filter((c) => c.kind === 'ready')).toHaveLength(0);
    await dev.subscribeAsync(topics.ota('OTA-1'), { qos: 1 });
    await expect.poll(() => calls.filter((c) => c.kind === 'ready').length).toBe(1);
    expect(calls[0]!.input).toMatchObject({ serial: 'OTA-1', accountId: account.accountId });
    await dev.endAsync();
    // clean: false: the subscription survives; no SUBSCRIBE is sent again.
    const again = await connectDevice(server.service.mqttUrl!, creds);
    await expect.poll(() => calls.filter((c) => c.kind === 'ready').length).toBe(2);
    const received: string[] = [];
    again.on('message', (_t, p) => received.push(p.toString()));
    await server.service.services.gateway.publishOta('OTA-1', {
      jobId: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11',
      version: '1.1.0',
      model: 'LX-200',
      url: 'http://127.0.0.1/fw',
      sha256: 'a'.repeat(64),
      size: 10,
    });
    await expect.poll(() => received.length).toBe(1);
    expect(JSON.parse(received[0]!)).toMatchObject({
      job_id: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11',
      version: '1.1.0',
    });
    await again.endAsync();
  });

  it('hears a device once per connection: ready, its first heartbeat in, and the reports it sent before that heartbeat stored', async () => {
    const JOB = '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11';
    let store: () => void = () => undefined;
    listenInsteadOfOtaEngine(server.service.services.ota, {
      ...listener,
      onProgress: () => new Promise<void>((resolve) => (store = resolve)),
    });
    const gateway = server.service.services.gateway;
    const heard = () => calls.filter((c) => c.kind === 'heard');
    const before = heard().length;
    try {
      const dev = await connectDevice(server.service.mqttUrl!, creds);
      await dev.subscribeAsync(topics.ota('OTA-1'), { qos: 1 });
      // The report it kept while it was away comes first; the engine is slow to store it.
      void dev.publishAsync(
        topics.otaProgress('OTA-1'),
        JSON.stringify({ job_id: JOB, state: 'failed', error: 'download broken' }),
        { qos: 1 },
      );
      await dev.publishAsync(topics.heartbeat('OTA-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      await new Promise((r) => setTimeout(r, 300));
      expect(heard()).toHaveLength(before);
      expect(gateway.heardSinceConnect('OTA-1')).toBe(false);
      store();
      await expect.poll(() => heard().length).toBe(before + 1);
      expect(heard().at(-1)!.input).toMatchObject({ serial: 'OTA-1', accountId: account.accountId, firmware: '1.0.0' });
      expect(gateway.heardSinceConnect('OTA-1')).toBe(true);
      await dev.publishAsync(topics.heartbeat('OTA-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      await new Promise((r) => setTimeout(r, 100));
      expect(heard()).toHaveLength(before + 1);
      await dev.endAsync();
      expect(gateway.heardSinceConnect('OTA-1')).toBe(false);
    } finally {
      listenInsteadOfOtaEngine(server.service.services.ota, listener);
    }
  });

  it('does not replay an OTA command that waited in the persistent session (the engine sends again what is still due)', async () => {
    const dev = await connectDevice(server.service.mqttUrl!, creds);
    await dev.subscribeAsync(topics.ota('OTA-1'), { qos: 1 });
    await dev.endAsync();
    await server.service.services.gateway.publishOta('OTA-1', {
      jobId: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11',
      version: '1.1.0',
      model: 'LX-200',
      url: 'http://127.0.0.1/fw',
      sha256: 'a'.repeat(64),
      size: 10,
    });
    const received: string[] = [];
    const again = mqtt.connect(server.service.mqttUrl!, deviceOptions(creds));
    again.on('message', (topic) => received.push(topic));
    await new Promise<void>((resolve) => again.once('connect', () => resolve()));
    await expect.poll(() => server.service.services.gateway.isConnected('OTA-1')).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(received.filter((t) => t === topics.ota('OTA-1'))).toEqual([]);
    // Live commands still arrive once the connection is ready.
    await server.service.services.gateway.publishOta('OTA-1', {
      jobId: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11',
      version: '1.1.0',
      model: 'LX-200',
      url: 'http://127.0.0.1/fw',
      sha256: 'a'.repeat(64),
      size: 10,
    });
    await expect.poll(() => received.filter((t) => t === topics.ota('OTA-1')).length).toBe(1);
    await again.endAsync();
  });

  it('passes valid progress reports on and drops invalid ones', async () => {
    const dev = await connectDevice(server.service.mqttUrl!, creds);
    const before = calls.filter((c) => c.kind === 'progress').length;
    await dev.publishAsync(
      topics.otaProgress('OTA-1'),
      JSON.stringify({ job_id: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11', state: 'downloading', progress: 42 }),
      { qos: 1 },
    );
    await dev.publishAsync(
      topics.otaProgress('OTA-1'),
      JSON.stringify({ job_id: 'not-a-job', state: 'downloading', progress: 42 }),
      { qos: 1 },
    );
    await dev.publishAsync(
      topics.otaProgress('OTA-1'),
      JSON.stringify({ job_id: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11', state: 'downloading', progress: 420 }),
      { qos: 1 },
    );
    await dev.publishAsync(
      topics.otaProgress('OTA-1'),
      JSON.stringify({ job_id: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11', state: 'failed', error: 'sha256 mismatch' }),
      { qos: 1 },
    );
    await expect.poll(() => calls.filter((c) => c.kind === 'progress').length).toBe(before + 2);
    const progress = calls
      .filter((c) => c.kind === 'progress')
      .slice(-2)
      .map((c) => (c.input as { report: unknown }).report);
    expect(progress).toEqual([
      { jobId: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11', state: 'downloading', progress: 42 },
      { jobId: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11', state: 'failed', error: 'sha256 mismatch' },
    ]);
    await dev.endAsync();
  });

  it('acknowledges a progress report only once the engine stored it, and closes the connection instead when it could not', async () => {
    const JOB = '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11';
    let store: () => void = () => undefined;
    let refuse: (err: Error) => void = () => undefined;
    let reports = 0;
    listenInsteadOfOtaEngine(server.service.services.ota, {
      ...listener,
      onProgress: () =>
        new Promise<void>((resolve, reject) => {
          reports += 1;
          store = resolve;
          refuse = reject;
        }),
    });
    try {
      const dev = await connectDevice(server.service.mqttUrl!, creds);
      let acked = false;
      const first = dev
        .publishAsync(
          topics.otaProgress('OTA-1'),
          JSON.stringify({ job_id: JOB, state: 'downloading', progress: 10 }),
          { qos: 1 },
        )
        .then(() => {
          acked = true;
        });
      await new Promise((r) => setTimeout(r, 300));
      expect(acked).toBe(false);
      store();
      await first;
      expect(acked).toBe(true);
      expect(dev.connected).toBe(true);

      // Not stored (the database is away): no PUBACK, the connection closes, the device keeps its report.
      const closed = new Promise<void>((resolve) => dev.once('close', () => resolve()));
      void dev
        .publishAsync(
          topics.otaProgress('OTA-1'),
          JSON.stringify({ job_id: JOB, state: 'failed', error: 'flash write failed' }),
          { qos: 1 },
        )
        .catch(() => undefined);
      await expect.poll(() => reports).toBe(2);
      await new Promise((r) => setTimeout(r, 100));
      expect(dev.connected).toBe(true);
      refuse(new Error('database unavailable'));
      await closed;
      dev.end(true);
    } finally {
      listenInsteadOfOtaEngine(server.service.services.ota, listener);
    }
  });

  it('reports firmware after the heartbeat is persisted: when it changed, and while an update is in progress', async () => {
    const dev = await connectDevice(server.service.mqttUrl!, creds);
    await dev.publishAsync(topics.heartbeat('OTA-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await server.service.ingest.flush();
    const firmware = () =>
      calls
        .filter((c) => c.kind === 'firmware')
        .flatMap((c) => c.input as Array<{ firmware: string; previous: string | null }>);
    await expect.poll(() => firmware().length).toBe(1);
    expect(firmware()[0]).toMatchObject({ serial: 'OTA-1', firmware: '1.0.0', previous: null });
    // Same version, nothing in progress: nothing to report.
    await dev.publishAsync(topics.heartbeat('OTA-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await server.service.ingest.flush();
    // An update in progress: every heartbeat is reported (a heartbeat on the target version completes it).
    await server.service.database
      .knex('devices')
      .where({ serial: 'OTA-1' })
      .update({ current_update_id: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11' });
    await dev.publishAsync(topics.heartbeat('OTA-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await server.service.ingest.flush();
    await expect.poll(() => firmware().length).toBe(2);
    await dev.publishAsync(topics.heartbeat('OTA-1'), heartbeat({ firmware: '1.1.0' }), { qos: 1 });
    await server.service.ingest.flush();
    await expect.poll(() => firmware().length).toBe(3);
    expect(firmware()[2]).toMatchObject({ firmware: '1.1.0', previous: '1.0.0' });
    await dev.endAsync();
  });
});
