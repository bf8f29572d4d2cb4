import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { randomUUID } from 'node:crypto';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { collect, connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ManualClock } from '#core/shared/clock';
import { claimWithCredentials, deployment, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';

type Creds = { serial: string; username: string; password: string };

/**
 * The device side of OTA driven by hand with mqtt.js (a device written by someone else), on an
 * injected clock: the connect/subscribe race, the state machine (out of order, unknown and
 * finished jobs), boot confirmation, deadlines, maintenance windows across time zones, the
 * per-tag limit and the health gate.
 */
describe('OTA protocol and timing (manual clock)', { timeout: 90_000 }, () => {
  const clock = new ManualClock('2026-01-15T01:30:00Z');
  let server: TestServer;
  let a: TestAccount;
  const clients: MqttClient[] = [];
  const poll = { timeout: 30_000, interval: 50 };

  beforeAll(async () => {
    server = await startTestServer({
      clock,
      env: {
        OTA_SWEEP_INTERVAL_MS: '0',
        OTA_STEP_TIMEOUT_S: '60',
        OTA_BOOT_TIMEOUT_S: '30',
        OTA_RESEND_AFTER_S: '3600',
        OTA_DISPATCH_FIRST_PAGE: '2',
        OTA_DISPATCH_MAX_PAGE: '4',
      },
    });
    a = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    await buildModel(a, 'LX-200');
    for (const v of ['1.0.0', '2.0.0'])
      await uploadFirmware(a, { model: 'LX-200', version: v, bytes: Buffer.alloc(2000, v), expectStatus: 201 });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  const ota = () => server.service.services.ota;
  const connect = async (c: Creds, firmware = '1.0.0', subscribe = true) => {
    const client = await connectDevice(server.service.mqttUrl!, c);
    clients.push(client);
    const seen = collect(client);
    if (subscribe) await client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
    await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware }), { qos: 1 });
    await expect.poll(async () => (await a.api.get(`/api/v1/devices/${c.serial}`)).body.firmware, poll).toBe(firmware);
    const commands = () =>
      seen
        .filter((m) => m.topic === topics.ota(c.serial))
        .map((m) => JSON.parse(m.payload) as { job_id: string; version: string; url: string });
    return { client, commands };
  };
  const report = (client: MqttClient, serial: string, body: Record<string, unknown>) =>
    client.publishAsync(topics.otaProgress(serial), JSON.stringify(body), { qos: 1 });
  const updateOf = async (deploymentId: string, serial: string) =>
    (await a.api.get(`/api/v1/firmware/deployments/${deploymentId}/devices?limit=1000`)).body.devices.find(
      (d: { serial: string }) => d.serial === serial,
    );
  const deploy = async (body: Record<string, unknown>) => {
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      ...body,
      filter: { model: 'LX-200', ...(body.filter as object) },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    await ota().idle();
    return res.body.deployment_id as string;
  };

  it('a claimed device that never reported counts as running its claim firmware for firmware_lt, and connects straight to the newer deployment', async () => {
    const [c] = (await claimWithCredentials(a, { serials: ['CLAIMED-1'], model: 'LX-200', firmware: '1.0.0' })) as [
      Creds,
    ];
    const claimDeployment = (await a.api.get('/api/v1/devices/CLAIMED-1')).body.update.deployment_id as string;
    // Never connected: it shows no firmware, yet it is older than 2.0.0 for every filter.
    const listed = await a.api.get('/api/v1/devices?model=LX-200&firmware_lt=2.0.0&limit=100');
    expect(listed.body.devices.find((d: { serial: string }) => d.serial === 'CLAIMED-1')).toMatchObject({
      firmware: null,
      status: 'offline',
    });
    expect(
      (await a.api.get('/api/v1/devices?model=LX-200&firmware_lt=1.0.0&limit=100')).body.devices.map(
        (d: { serial: string }) => d.serial,
      ),
    ).not.toContain('CLAIMED-1');
    const dry = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200', firmware_lt: '2.0.0', serials: ['CLAIMED-1'] },
      dry_run: true,
    });
    expect(dry.body.target_count).toBe(1);
    const id = await deploy({ filter: { firmware_lt: '2.0.0', serials: ['CLAIMED-1'] } });
    expect((await deployment(a, id)).target_count).toBe(1);
    expect(await updateOf(claimDeployment, 'CLAIMED-1')).toMatchObject({ state: 'cancelled' });
    // Its first heartbeat says what it really runs; the job it gets is the newer version's (its
    // connection and its heartbeat may each publish it: the same job id, which devices dedupe).
    const dev = await connect(c, '1.0.0');
    await expect.poll(() => dev.commands().length, poll).toBeGreaterThan(0);
    const job = (await updateOf(id, 'CLAIMED-1')).job_id as string;
    expect(new Set(dev.commands().map((cmd) => `${cmd.job_id} ${cmd.version}`))).toEqual(new Set([`${job} 2.0.0`]));
  });

  it('re-sends the same job when the device subscribes after the command went out (connect/subscribe race)', async () => {
    const [c] = (await claimWithCredentials(a, { serials: ['RACE-1'], model: 'LX-200' })) as [Creds];
    const dev = await connect(c, '1.0.0', false);
    const id = await deploy({ serials: ['RACE-1'] });
    await expect.poll(async () => (await updateOf(id, 'RACE-1')).state, poll).toBe('sent');
    expect(dev.commands()).toHaveLength(0);
    await dev.client.subscribeAsync(topics.ota('RACE-1'), { qos: 1 });
    await expect.poll(() => dev.commands().length, poll).toBe(1);
    const update = await updateOf(id, 'RACE-1');
    expect(dev.commands()[0]).toMatchObject({ job_id: update.job_id, version: '2.0.0' });
    expect(update.attempts).toBe(2);
    const device = await a.api.get('/api/v1/devices/RACE-1');
    expect(device.body.status).toBe('updating');
  });

  it('applies steps in order, ignores out-of-order, unknown and finished reports, and completes on the heartbeat when `succeeded` was lost', async () => {
    const [c] = (await claimWithCredentials(a, { serials: ['SM-1'], model: 'LX-200' })) as [Creds];
    const dev = await connect(c);
    const id = await deploy({ serials: ['SM-1'] });
    await expect.poll(() => dev.commands().length, poll).toBe(1);
    const job = dev.commands()[0]!.job_id;
    await report(dev.client, 'SM-1', { job_id: job, state: 'downloading', progress: 30 });
    await report(dev.client, 'SM-1', { job_id: job, state: 'installing', progress: 10 });
    await expect.poll(async () => (await updateOf(id, 'SM-1')).state, poll).toBe('installing');
    await report(dev.client, 'SM-1', { job_id: job, state: 'downloading', progress: 90 });
    await report(dev.client, 'SM-1', { job_id: randomUUID(), state: 'failed', error: 'not mine' });
    await report(dev.client, 'SM-1', { job_id: job, state: 'rebooting' });
    await expect.poll(async () => (await updateOf(id, 'SM-1')).state, poll).toBe('rebooting');
    // Back on the new version; the `succeeded` message never arrives.
    await dev.client.publishAsync(topics.heartbeat('SM-1'), heartbeat({ firmware: '2.0.0' }), { qos: 1 });
    await expect.poll(async () => (await updateOf(id, 'SM-1')).state, poll).toBe('succeeded');
    await report(dev.client, 'SM-1', { job_id: job, state: 'failed', error: 'late' });
    await ota().idle();
    expect(await updateOf(id, 'SM-1')).toMatchObject({ state: 'succeeded', error: null, progress: 100 });
    expect((await deployment(a, id)).status).toBe('completed');
    const device = await a.api.get('/api/v1/devices/SM-1');
    expect(device.body.status).toBe('online');
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/fleet_ota_reports_ignored_total\{reason="out_of_order"\} [1-9]/);
    expect(metrics).toMatch(/fleet_ota_reports_ignored_total\{reason="finished"\} [1-9]/);
  });

  it('no progress before the deadline ends timed_out; `succeeded` without coming back on the version also times out', async () => {
    const creds = (await claimWithCredentials(a, { serials: ['TO-1', 'TO-2'], model: 'LX-200' })) as Creds[];
    const d1 = await connect(creds[0]!);
    const d2 = await connect(creds[1]!);
    const id = await deploy({ serials: ['TO-1', 'TO-2'] });
    await expect.poll(() => d1.commands().length + d2.commands().length, poll).toBe(2);
    await report(d1.client, 'TO-1', { job_id: d1.commands()[0]!.job_id, state: 'downloading', progress: 5 });
    await report(d2.client, 'TO-2', { job_id: d2.commands()[0]!.job_id, state: 'succeeded' });
    await expect.poll(async () => (await updateOf(id, 'TO-2')).state, poll).toBe('rebooting');
    clock.advance(31_000);
    await ota().runNow();
    expect((await updateOf(id, 'TO-2')).state).toBe('timed_out');
    expect((await updateOf(id, 'TO-1')).state).toBe('downloading');
    clock.advance(30_000);
    await ota().runNow();
    await ota().idle();
    expect(await updateOf(id, 'TO-1')).toMatchObject({ state: 'timed_out', error: 'no progress before the deadline' });
    // A late report after the deadline changes nothing.
    await report(d1.client, 'TO-1', { job_id: d1.commands()[0]!.job_id, state: 'installing' });
    await ota().idle();
    expect((await updateOf(id, 'TO-1')).state).toBe('timed_out');
    expect((await deployment(a, id)).status).toBe('completed_with_failures');
    const failed = await server.service.database
      .knex('events')
      .where({ account_id: a.accountId, type: 'firmware.update.failed' })
      .whereRaw("data->>'deployment_id' = ?", [id]);
    expect(failed).toHaveLength(2);
  });

  it('a queued update whose target the device already runs (installed over USB) completes as already installed', async () => {
    const [c] = (await claimWithCredentials(a, { serials: ['USB-1'], model: 'LX-200' })) as [Creds];
    const id = await deploy({ serials: ['USB-1'] });
    await a.api.post(`/api/v1/firmware/deployments/${id}/pause`);
    const dev = await connect(c, '2.0.0');
    await ota().idle();
    expect(await updateOf(id, 'USB-1')).toMatchObject({ state: 'succeeded' });
    expect(dev.commands()).toHaveLength(0);
  });

  it("respects each device's maintenance window in its own time zone", async () => {
    const creds = (await claimWithCredentials(a, { serials: ['WIN-BER', 'WIN-NYC'], model: 'LX-200' })) as Creds[];
    for (const [serial, timezone] of [
      ['WIN-BER', 'Europe/Berlin'],
      ['WIN-NYC', 'America/New_York'],
    ] as const) {
      const res = await a.api.patch(`/api/v1/devices/${serial}`, {
        config: { timezone, maintenance_window: { start: '02:00', end: '04:00' } },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    clock.set('2026-01-15T01:30:00Z'); // Berlin 02:30 (inside), New York 20:30 (outside)
    const ber = await connect(creds[0]!);
    const nyc = await connect(creds[1]!);
    const id = await deploy({ serials: ['WIN-BER', 'WIN-NYC'], respect_maintenance_window: true });
    await expect.poll(() => ber.commands().length, poll).toBe(1);
    await ota().runNow();
    expect(nyc.commands()).toHaveLength(0);
    expect((await updateOf(id, 'WIN-NYC')).state).toBe('queued');
    clock.set('2026-01-15T07:30:00Z'); // New York 02:30
    await nyc.client.publishAsync(topics.heartbeat('WIN-NYC'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await expect.poll(async () => (await a.api.get('/api/v1/devices/WIN-NYC')).body.connectivity, poll).toBe('online');
    await ota().runNow();
    await expect.poll(() => nyc.commands().length, poll).toBe(1);
  });

  it('max_concurrent_per_tag keeps at most N devices of one zone updating at once', async () => {
    const serials = ['Z-1', 'Z-2', 'Z-3'];
    const creds = (await claimWithCredentials(a, { serials, model: 'LX-200' })) as Creds[];
    for (const s of serials)
      expect((await a.api.patch(`/api/v1/devices/${s}`, { tags: { zone: 'hall' } })).status).toBe(200);
    const devs = await Promise.all(creds.map((c) => connect(c)));
    const id = await deploy({ serials, rollout: { max_concurrent_per_tag: { tag: 'zone', max: 1 } } });
    const sentCount = () => devs.reduce((n, d) => n + d.commands().length, 0);
    await expect.poll(sentCount, poll).toBe(1);
    await ota().runNow();
    expect(sentCount()).toBe(1);
    const first = devs.find((d) => d.commands().length === 1)!;
    const serial = creds[devs.indexOf(first)]!.serial;
    await first.client.publishAsync(topics.heartbeat(serial), heartbeat({ firmware: '2.0.0' }), { qos: 1 });
    await expect.poll(async () => (await updateOf(id, serial)).state, poll).toBe('succeeded');
    await ota().runNow();
    await expect.poll(sentCount, poll).toBe(2);
  });

  it('a deployment larger than one dispatch transaction goes out in growing pages, one command per device', async () => {
    // This server dispatches 2, then 4 commands per transaction (OTA_DISPATCH_* above); the sweep
    // is off, so only the paging itself can reach the ninth device.
    const serials = Array.from({ length: 9 }, (_, i) => `PG-${i + 1}`);
    const creds = (await claimWithCredentials(a, { serials, model: 'LX-200' })) as Creds[];
    const devs = await Promise.all(creds.map((c) => connect(c)));
    const id = await deploy({ serials });
    await expect.poll(() => devs.map((d) => d.commands().length), poll).toEqual(serials.map(() => 1));
    for (const s of serials) expect((await updateOf(id, s)).state).toBe('sent');
    expect((await deployment(a, id)).counts.sent).toBe(9);
  });

  it('a deployment with scheduled_at waits until then, then starts by itself', async () => {
    const [c] = (await claimWithCredentials(a, { serials: ['SCH-1'], model: 'LX-200' })) as [Creds];
    const dev = await connect(c);
    const at = new Date(clock.now().getTime() + 3600_000).toISOString();
    const id = await deploy({ serials: ['SCH-1'], scheduled_at: at });
    expect(await deployment(a, id)).toMatchObject({ status: 'scheduled', started_at: null });
    await ota().runNow();
    expect(dev.commands()).toHaveLength(0);
    clock.advance(3600_000 + 1000);
    await dev.client.publishAsync(topics.heartbeat('SCH-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await expect.poll(async () => (await a.api.get('/api/v1/devices/SCH-1')).body.connectivity, poll).toBe('online');
    await ota().runNow();
    await ota().idle();
    expect((await deployment(a, id)).status).toBe('running');
    await expect.poll(() => dev.commands().length, poll).toBe(1);
  });

  /** A device updated to 2.0.0 by a deployment whose health gate allows 2 reconnects in 10 minutes. */
  const updatedUnderHealthGate = async (serial: string) => {
    const [c] = (await claimWithCredentials(a, { serials: [serial], model: 'LX-200' })) as [Creds];
    const dev = await connect(c);
    const id = await deploy({ serials: [serial], rollout: { health_window_minutes: 10, health_max_reconnects: 2 } });
    await expect.poll(() => dev.commands().length, poll).toBe(1);
    await dev.client.publishAsync(topics.heartbeat(serial), heartbeat({ firmware: '2.0.0' }), { qos: 1 });
    await expect.poll(async () => (await updateOf(id, serial)).state, poll).toBe('succeeded');
    return { c, dev, id };
  };
  /** Drops the connection and comes back on `firmware`, three times, the engine seeing each reconnect. */
  const reconnectThreeTimes = async (c: Creds, dev: Awaited<ReturnType<typeof connect>>, firmware: string) => {
    for (let i = 0; i < 3; i++) {
      await dev.client.endAsync(true);
      dev = await connect(c, firmware);
      await ota().idle();
    }
    return dev;
  };

  it('health gate: a device that keeps reconnecting after its update counts as a failure', async () => {
    const { c, dev, id } = await updatedUnderHealthGate('HG-1');
    await reconnectThreeTimes(c, dev, '2.0.0');
    await expect.poll(async () => (await updateOf(id, 'HG-1')).health_failed, poll).toBe(true);
    expect((await deployment(a, id)).counts.health_failed).toBe(1);
    // The device's history says why, in the same statement that counted the third reconnect.
    const history = (await a.api.get('/api/v1/devices/HG-1/history?limit=100')).body as {
      events: Array<{ type: string; data: Record<string, unknown> }>;
    };
    const job = await updateOf(id, 'HG-1');
    expect(history.events.filter((e) => e.type === 'update_step' && e.data.health === 'failed')).toEqual([
      expect.objectContaining({
        data: {
          job_id: job.job_id,
          deployment_id: id,
          state: 'succeeded',
          health: 'failed',
          reconnects: 3,
          window_minutes: 10,
        },
      }),
    ]);
  });

  it('health gate: the reboots of a newer update do not count against the update before it', async () => {
    const updated = await updatedUnderHealthGate('HG-2');
    // A hotfix minutes later: while it installs, the device goes down and comes back three times.
    await uploadFirmware(a, {
      model: 'LX-200',
      version: '2.0.1',
      bytes: Buffer.alloc(2000, '2.0.1'),
      expectStatus: 201,
    });
    const hotfix = await deploy({ firmware_version: '2.0.1', serials: ['HG-2'] });
    await expect.poll(() => updated.dev.commands().some((m) => m.version === '2.0.1'), poll).toBe(true);
    const dev = await reconnectThreeTimes(updated.c, updated.dev, '2.0.0');
    expect((await updateOf(updated.id, 'HG-2')).health_failed).toBe(false);
    expect((await deployment(a, updated.id)).counts.health_failed).toBe(0);
    await dev.client.publishAsync(topics.heartbeat('HG-2'), heartbeat({ firmware: '2.0.1' }), { qos: 1 });
    await expect.poll(async () => (await updateOf(hotfix, 'HG-2')).state, poll).toBe('succeeded');
  });
});
