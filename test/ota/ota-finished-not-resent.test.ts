import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import mqtt, { type MqttClient } from 'mqtt';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { deviceOptions, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ManualClock } from '#core/shared/clock';
import type { OtaCommand } from '#protocol/payloads';
import { claimWithCredentials, uploadFirmware } from './ota-helpers';
import { listenInsteadOfOtaEngine, restoreOtaEngine } from '../helpers/stand-ins';
import { ifStarted } from '../helpers/teardown';

type Creds = { serial: string; username: string; password: string };

/**
 * A device whose connection died mid-update (the process holding it was killed, its Wi-Fi
 * dropped) carries on, and on its next connection says where it stands: first the report it
 * kept, then a heartbeat. Whatever reaches that connection in the meantime must not be a job it
 * already finished: not a copy of the command left in its persistent session, not the re-send
 * for a (re)connected device, not the sweep's re-send of a stale command. The device's reports
 * are made slow to store here, the window in which those used to slip through.
 */
describe('OTA: a finished job is not sent again when its device comes back', { timeout: 90_000 }, () => {
  const clock = new ManualClock('2026-03-02T10:00:00Z');
  let server: TestServer;
  let a: TestAccount;
  const clients: MqttClient[] = [];
  const poll = { timeout: 30_000, interval: 50 };

  beforeAll(async () => {
    server = await startTestServer({
      clock,
      env: {
        OTA_SWEEP_INTERVAL_MS: '0',
        OTA_RESEND_AFTER_S: '60',
        OTA_STEP_TIMEOUT_S: '900',
        OTA_BOOT_TIMEOUT_S: '600',
      },
    });
    a = await server.createAccount({ quota: 100, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    await buildModel(a, 'LX-200');
    for (const v of ['1.0.0', '2.0.0'])
      await uploadFirmware(a, { model: 'LX-200', version: v, bytes: Buffer.alloc(2000, v), expectStatus: 201 });
  }, 60_000);
  afterEach(() => restoreOtaEngine(ota()));
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  const ota = () => server.service.services.ota;

  /** A connection whose OTA commands are recorded from its first byte: a replay arrives before mqtt.js reports the connection. */
  const open = async (c: Creds) => {
    const client = mqtt.connect(server.service.mqttUrl!, deviceOptions(c));
    clients.push(client);
    const commands: string[] = [];
    client.on('message', (topic, payload) => {
      if (topic === topics.ota(c.serial)) commands.push((JSON.parse(payload.toString()) as OtaCommand).job_id);
    });
    await new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    });
    return { client, commands };
  };
  const report = (client: MqttClient, serial: string, body: Record<string, unknown>) =>
    client.publishAsync(topics.otaProgress(serial), JSON.stringify(body), { qos: 1 });
  const beat = (client: MqttClient, serial: string, firmware: string) =>
    client.publishAsync(topics.heartbeat(serial), heartbeat({ firmware }), { qos: 1 });
  const stateOf = async (deploymentId: string, serial: string) =>
    (
      (await a.api.get(`/api/v1/firmware/deployments/${deploymentId}/devices?limit=100`)).body.devices as Array<{
        serial: string;
        state: string;
      }>
    ).find((d) => d.serial === serial)?.state;

  /** A device on 1.0.0 that received its 2.0.0 command (state `sent`). */
  const commanded = async (serial: string) => {
    const [c] = (await claimWithCredentials(a, { serials: [serial], model: 'LX-200' })) as [Creds];
    const dev = await open(c);
    await dev.client.subscribeAsync(topics.ota(serial), { qos: 1 });
    await beat(dev.client, serial, '1.0.0');
    await expect.poll(async () => (await a.api.get(`/api/v1/devices/${serial}`)).body.firmware, poll).toBe('1.0.0');
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      serials: [serial],
      filter: { model: 'LX-200' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.deployment_id as string;
    await expect.poll(() => dev.commands.length, poll).toBe(1);
    return { c, dev, id, job: dev.commands[0]! };
  };

  /** The engine stores progress reports `ms` late (a busy engine; the broker acknowledges them only once stored). */
  const slowReports = (ms: number) => {
    // The engine's own methods, bound before the stand-in covers them.
    const engine = ota();
    const own = {
      ready: engine.onDeviceReady.bind(engine),
      heard: engine.onDeviceHeard.bind(engine),
      firmware: engine.onFirmwareReported.bind(engine),
      progress: engine.onProgress.bind(engine),
    };
    listenInsteadOfOtaEngine(engine, {
      onDeviceReady: (input) => own.ready(input),
      onDeviceHeard: (input) => own.heard(input),
      onFirmwareReported: (reports) => own.firmware(reports),
      onProgress: async (input) => {
        await sleep(ms);
        await own.progress(input);
      },
    });
  };

  /** Whatever the service was going to send has been sent and delivered. */
  const quiet = async () => {
    await ota().idle();
    await sleep(300);
    await ota().idle();
  };

  it('a copy of the command left in the persistent session is not replayed to the device that finished the job', async () => {
    const { c, dev, id, job } = await commanded('RP-1');
    const command = await server.service.database
      .knex('device_updates as u')
      .join('firmware_versions as f', 'f.id', 'u.firmware_version_id')
      .where('u.id', job)
      .first<{ sha256: string; size: number }>('f.sha256', 'f.size');
    await report(dev.client, 'RP-1', { job_id: job, state: 'downloading', progress: 0 });
    await report(dev.client, 'RP-1', { job_id: job, state: 'rebooting' });
    await expect.poll(() => stateOf(id, 'RP-1'), poll).toBe('rebooting');
    await dev.client.endAsync();
    // Published while the device reboots: it waits in the session, as the copy a killed process
    // had stored there and never delivered did.
    await server.service.services.gateway.publishOta('RP-1', {
      jobId: job,
      version: '2.0.0',
      model: 'LX-200',
      url: 'http://127.0.0.1/firmware/stale',
      sha256: command.sha256,
      size: command.size,
    });
    const back = await open(c);
    await beat(back.client, 'RP-1', '2.0.0');
    await report(back.client, 'RP-1', { job_id: job, state: 'succeeded' });
    await expect.poll(() => stateOf(id, 'RP-1'), poll).toBe('succeeded');
    await quiet();
    expect(back.commands).toEqual([]);
  });

  it('the re-send to a device that came back waits for the report it kept: a job it gave up on meanwhile is not sent again', async () => {
    const { c, dev, id, job } = await commanded('RR-1');
    // The connection dies before any report of this job was stored; the download fails meanwhile.
    dev.client.end(true);
    slowReports(500);
    const back = await open(c);
    void report(back.client, 'RR-1', { job_id: job, state: 'failed', error: 'download broken: connection reset' });
    void beat(back.client, 'RR-1', '1.0.0');
    await expect.poll(() => stateOf(id, 'RR-1'), poll).toBe('failed');
    await quiet();
    expect(back.commands).toEqual([]);
  });

  it('the sweep does not re-send a stale command to a device that came back with its report still being stored', async () => {
    const { c, dev, id, job } = await commanded('SW-1');
    dev.client.end(true);
    // Unanswered for longer than OTA_RESEND_AFTER_S: the sweep's re-send applies.
    clock.advance(61_000);
    slowReports(1500);
    const back = await open(c);
    void report(back.client, 'SW-1', { job_id: job, state: 'failed', error: 'download broken: connection reset' });
    await beat(back.client, 'SW-1', '1.0.0');
    await expect.poll(async () => (await a.api.get('/api/v1/devices/SW-1')).body.connectivity, poll).toBe('online');
    expect(await stateOf(id, 'SW-1')).toBe('sent');
    await ota().runNow();
    await expect.poll(() => stateOf(id, 'SW-1'), poll).toBe('failed');
    await quiet();
    expect(back.commands).toEqual([]);
  });
});
