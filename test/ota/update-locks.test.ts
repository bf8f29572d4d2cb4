import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { randomUUID } from 'node:crypto';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { MAX_UPDATE_LOCK_S } from '#protocol/lock-payloads';
import { ManualClock } from '#core/shared/clock';
import { claimWithCredentials, connectHeard, deployment, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { gql } from '../graphql/graphql-client';

type Creds = { serial: string; username: string; password: string };

const HOUR = 3600_000;

/**
 * Update locks (docs/ota.md "Update locks", docs/device-protocol.md "Update locks"), driven by
 * hand with mqtt.js on an injected clock: a device's "not now" holds its update (state of the
 * update, not of the device), the cap, the emergency-lighting 24 h rule, frozen sites, and what
 * a held update does not count against (deadlines, failure thresholds).
 */
describe('update locks (manual clock)', { timeout: 120_000 }, () => {
  const clock = new ManualClock('2026-03-10T10:00:00Z');
  let server: TestServer;
  let a: TestAccount;
  let other: TestAccount;
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
      },
    });
    a = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    other = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    await buildModel(a, 'LX-200');
    await buildModel(a, 'EM-1');
    const flagged = await a.api.request('PUT', '/api/v1/models/EM-1/emergency-lighting', {
      body: { emergency_lighting: true },
    });
    expect(flagged.status, JSON.stringify(flagged.body)).toBe(200);
    for (const model of ['LX-200', 'EM-1'])
      for (const v of ['1.0.0', '2.0.0'])
        await uploadFirmware(a, { model, version: v, bytes: Buffer.alloc(2000, v), expectStatus: 201 });
    await buildModel(other, 'LX-200');
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  const ota = () => server.service.services.ota;
  const knex = () => server.service.database.knex;
  const claim = async (account: TestAccount, serial: string, model = 'LX-200') =>
    ((await claimWithCredentials(account, { serials: [serial], model })) as [Creds])[0];
  const connect = async (account: TestAccount, c: Creds) => {
    const { client, commands } = await connectHeard(server.service.mqttUrl!, account, c, clients);
    const lock = (body: unknown) =>
      client.publishAsync(topics.otaLock(c.serial), typeof body === 'string' ? body : JSON.stringify(body), { qos: 1 });
    /** The clock moved: a heartbeat keeps the device online before the sweep looks. */
    const alive = async () => {
      await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      await expect
        .poll(async () => (await account.api.get(`/api/v1/devices/${c.serial}`)).body.connectivity, poll)
        .toBe('online');
    };
    return { client, commands, lock, alive };
  };
  const updateOf = async (deploymentId: string, serial: string) =>
    (await a.api.get(`/api/v1/firmware/deployments/${deploymentId}/devices?limit=1000`)).body.devices.find(
      (d: { serial: string }) => d.serial === serial,
    );
  const deploy = async (body: Record<string, unknown>, model = 'LX-200') => {
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', filter: { model }, ...body });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    await ota().idle();
    return res.body.deployment_id as string;
  };
  const lockRow = (serial: string) =>
    knex()('device_update_locks as l').join('devices as d', 'd.id', 'l.device_id').where('d.serial', serial).first();

  it('a lock holds the update (shown held with its reason; the device stays online), and the sweep sends it once the lock ended', async () => {
    const c = await claim(a, 'LOCK-1');
    const dev = await connect(a, c);
    await dev.lock({ for_s: 600, reason: 'occupied' });
    await expect.poll(async () => (await lockRow('LOCK-1'))?.reason, poll).toBe('occupied');

    const dry = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200' },
      serials: ['LOCK-1'],
      dry_run: true,
    });
    expect(dry.body.held).toEqual({ count: 1, reasons: { occupied: 1 }, serials: ['LOCK-1'] });

    const id = await deploy({ serials: ['LOCK-1'] });
    await ota().runNow();
    expect(dev.commands()).toHaveLength(0);
    const until = new Date(clock.now().getTime() + 600_000).toISOString();
    expect(await updateOf(id, 'LOCK-1')).toMatchObject({ state: 'queued', held: { reason: 'occupied', until } });
    expect((await deployment(a, id)).held).toEqual({ count: 1, reasons: { occupied: 1 }, serials: ['LOCK-1'] });
    expect((await a.api.get('/api/v1/devices/LOCK-1')).body.status).toBe('online');
    // GraphQL shows the same: the deployment's held devices, each update's reason, the preview's.
    const viaGraphql = await gql(
      server.service.httpUrl,
      `query ($id: ID!, $input: DeployFirmwareInput!) {
        deployment(id: $id) {
          held { count reasons { reason count } serials }
          updates(first: 10) { edges { node { serial state heldReason heldUntil } } }
        }
        deployPreview(input: $input) { held { count reasons { reason count } serials } }
      }`,
      {
        apiKey: a.apiKey,
        variables: { id, input: { firmwareVersion: '2.0.0', filter: { model: 'LX-200', serials: ['LOCK-1'] } } },
      },
    );
    expect(viaGraphql.body.errors).toBeUndefined();
    const held = { count: 1, reasons: [{ reason: 'occupied', count: 1 }], serials: ['LOCK-1'] };
    expect(viaGraphql.body.data.deployment.held).toEqual(held);
    expect(viaGraphql.body.data.deployPreview.held).toEqual(held);
    expect(viaGraphql.body.data.deployment.updates.edges[0].node).toEqual({
      serial: 'LOCK-1',
      state: 'queued',
      heldReason: 'occupied',
      heldUntil: until,
    });

    clock.advance(601_000);
    await dev.alive();
    await ota().runNow();
    await expect.poll(() => dev.commands().length, poll).toBe(1);
    expect(await updateOf(id, 'LOCK-1')).toMatchObject({ state: 'sent', held: null });
    expect((await deployment(a, id)).held.count).toBe(0);
  });

  it('a release sends the held update at once', async () => {
    const c = await claim(a, 'LOCK-REL');
    const dev = await connect(a, c);
    await dev.lock({ for_s: 3600, reason: 'recharging' });
    await expect.poll(async () => (await lockRow('LOCK-REL'))?.reason, poll).toBe('recharging');
    const id = await deploy({ serials: ['LOCK-REL'] });
    expect((await updateOf(id, 'LOCK-REL')).held).toMatchObject({ reason: 'recharging' });
    await dev.lock({ release: true });
    await expect.poll(() => dev.commands().length, poll).toBe(1);
    expect((await updateOf(id, 'LOCK-REL')).state).toBe('sent');
  });

  it('a request above the cap is cut to 24 h and counted', async () => {
    const c = await claim(a, 'LOCK-CAP');
    const dev = await connect(a, c);
    const now = clock.now().getTime();
    await dev.lock({ for_s: 7 * 86_400, reason: 'other' });
    await expect.poll(async () => (await lockRow('LOCK-CAP'))?.reason, poll).toBe('other');
    const row = await lockRow('LOCK-CAP');
    expect(new Date(row.until).getTime()).toBe(now + MAX_UPDATE_LOCK_S * 1000);
    expect(new Date(row.requested_until).getTime()).toBe(now + 7 * 86_400_000);
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/fleet_ota_lock_messages_total\{reason="other",capped="true"\} 1/);
  });

  it('invalid lock messages are dropped and counted on the device, and lock nothing', async () => {
    const c = await claim(a, 'LOCK-BAD');
    const dev = await connect(a, c);
    await dev.lock({ for_s: 60, reason: 'lunch' });
    await dev.lock({ for_s: -5, reason: 'other' });
    await dev.lock({ for_s: 60, reason: 'occupied', duration_test_ended_s_ago: 10 });
    await dev.lock({ release: false });
    await dev.lock('not json');
    await server.service.ingest.flush();
    await expect
      .poll(async () => (await a.api.get('/api/v1/devices/LOCK-BAD')).body.refused_messages, poll)
      .toEqual({ invalid: 4, not_json: 1 });
    expect(await lockRow('LOCK-BAD')).toBeUndefined();
  });

  it('an emergency fixture that reports a duration test stays held 24 h after it, whatever its messages say', async () => {
    const c = await claim(a, 'EM-LOCK-1', 'EM-1');
    const dev = await connect(a, c);
    const testEnded = clock.now().getTime() - 600_000;
    await dev.lock({ for_s: 60, reason: 'emergency_test', duration_test_ended_s_ago: 600 });
    await expect.poll(async () => (await lockRow('EM-LOCK-1'))?.reason, poll).toBe('emergency_test');
    await dev.lock({ release: true });
    await dev.lock({ for_s: 30, reason: 'occupied' });
    await ota().idle();
    const view = await a.api.get('/api/v1/devices/EM-LOCK-1/update-lock');
    expect(view.body).toMatchObject({
      lock: { reason: 'emergency_test', until: new Date(testEnded + 24 * HOUR).toISOString() },
      last_duration_test_at: new Date(testEnded).toISOString(),
      emergency_lighting: { device: null, model: true, effective: true },
    });
    const id = await deploy({ serials: ['EM-LOCK-1'] }, 'EM-1');
    expect((await updateOf(id, 'EM-LOCK-1')).held).toEqual({
      reason: 'emergency_test',
      until: new Date(testEnded + 24 * HOUR).toISOString(),
    });
    clock.advance(23 * HOUR);
    await dev.alive();
    await ota().runNow();
    expect(dev.commands()).toHaveLength(0);
    clock.advance(HOUR);
    await dev.alive();
    await ota().runNow();
    await expect.poll(() => dev.commands().length, poll).toBe(1);
  });

  it("a device's own flag overrides its model's, and only its account may set it", async () => {
    const c = await claim(a, 'EM-OFF-1', 'EM-1');
    expect(
      (
        await other.api.request('PUT', '/api/v1/devices/EM-OFF-1/emergency-lighting', {
          body: { emergency_lighting: false },
        })
      ).status,
    ).toBe(404);
    expect(
      (
        await a.api.request('PUT', '/api/v1/devices/EM-OFF-1/emergency-lighting', {
          body: { emergency_lighting: 'no' },
        })
      ).status,
    ).toBe(422);
    const res = await a.api.request('PUT', '/api/v1/devices/EM-OFF-1/emergency-lighting', {
      body: { emergency_lighting: false },
    });
    expect(res.body.emergency_lighting).toEqual({ device: false, model: true, effective: false });
    const dev = await connect(a, c);
    await dev.lock({ for_s: 60, reason: 'emergency_test', duration_test_ended_s_ago: 0 });
    await expect.poll(async () => (await lockRow('EM-OFF-1'))?.reason, poll).toBe('emergency_test');
    await dev.lock({ release: true });
    await expect.poll(async () => (await lockRow('EM-OFF-1'))?.until, poll).toBeNull();
    expect((await a.api.get('/api/v1/devices/EM-OFF-1/update-lock')).body.lock).toBeNull();
  });

  it('the same duration test on an ordinary fixture is only the lock it asks for', async () => {
    const c = await claim(a, 'PLAIN-TEST');
    const dev = await connect(a, c);
    await dev.lock({ for_s: 60, reason: 'emergency_test', duration_test_ended_s_ago: 0 });
    await expect.poll(async () => (await lockRow('PLAIN-TEST'))?.reason, poll).toBe('emergency_test');
    const id = await deploy({ serials: ['PLAIN-TEST'] });
    expect((await updateOf(id, 'PLAIN-TEST')).held).toMatchObject({ reason: 'emergency_test' });
    await dev.lock({ release: true });
    await expect.poll(() => dev.commands().length, poll).toBe(1);
  });

  it('held updates never time out nor count against a failure threshold', async () => {
    const [held, failing] = [await claim(a, 'HOLD-TH-1'), await claim(a, 'HOLD-TH-2')];
    const devHeld = await connect(a, held);
    const devFailing = await connect(a, failing);
    await devHeld.lock({ for_s: 4 * 3600, reason: 'occupied' });
    await expect.poll(async () => (await lockRow('HOLD-TH-1'))?.reason, poll).toBe('occupied');
    const id = await deploy({ serials: ['HOLD-TH-1', 'HOLD-TH-2'], rollout: { failure_threshold_percent: 60 } });
    await expect.poll(() => devFailing.commands().length, poll).toBe(1);
    // Well past the step deadline (60 s): the sent one times out (1 of 2 = 50 %, under 60 %); the held one waits.
    clock.advance(2 * HOUR);
    await devHeld.alive();
    await ota().runNow();
    await ota().idle();
    expect((await updateOf(id, 'HOLD-TH-2')).state).toBe('timed_out');
    expect(await updateOf(id, 'HOLD-TH-1')).toMatchObject({ state: 'queued', held: { reason: 'occupied' } });
    const d = await deployment(a, id);
    expect(d).toMatchObject({ status: 'running', counts: { timed_out: 1, queued: 1 }, held: { count: 1 } });
    expect(devHeld.commands()).toHaveLength(0);
  });

  it('a lock that arrives after the command was sent takes it back; one after the device started does not hold it', async () => {
    const [c1, c2] = [await claim(a, 'LATE-1'), await claim(a, 'LATE-2')];
    const d1 = await connect(a, c1);
    const d2 = await connect(a, c2);
    const id = await deploy({ serials: ['LATE-1', 'LATE-2'] });
    await expect.poll(() => d1.commands().length + d2.commands().length, poll).toBe(2);
    const job1 = d1.commands()[0]!.job_id;
    const job2 = d2.commands()[0]!.job_id;
    await d2.client.publishAsync(
      topics.otaProgress('LATE-2'),
      JSON.stringify({ job_id: job2, state: 'downloading', progress: 5 }),
      { qos: 1 },
    );
    await expect.poll(async () => (await updateOf(id, 'LATE-2')).state, poll).toBe('downloading');

    await d1.lock({ for_s: 600, reason: 'occupied' });
    await d2.lock({ for_s: 600, reason: 'occupied' });
    await expect.poll(async () => (await updateOf(id, 'LATE-1')).state, poll).toBe('queued');
    expect((await updateOf(id, 'LATE-1')).held).toMatchObject({ reason: 'occupied' });
    expect((await a.api.get('/api/v1/devices/LATE-1')).body.status).toBe('online');
    // Webhook consumers that saw `sent` hear that it waits again, and why.
    const events = await knex()('events').where({
      account_id: a.accountId,
      type: 'firmware.update.progress',
      subject: 'LATE-1',
    });
    expect(
      events.map((e: { data: unknown }) => (typeof e.data === 'string' ? JSON.parse(e.data) : e.data)),
    ).toContainEqual(
      expect.objectContaining({ job_id: job1, state: 'queued', held: expect.objectContaining({ reason: 'occupied' }) }),
    );
    await ota().idle();
    expect((await updateOf(id, 'LATE-2')).state).toBe('downloading');

    await d1.lock({ release: true });
    await expect.poll(() => d1.commands().length, poll).toBe(2);
    expect(d1.commands()[1]!.job_id).toBe(job1);
  });

  it("a frozen site's devices are held (site_frozen) until the freeze ends", async () => {
    const c = await claim(a, 'FROZEN-1');
    const dev = await connect(a, c);
    const siteId = randomUUID();
    // Berlin (UTC+1 in March, before the change); freezes are in whole local minutes.
    clock.set(new Date(Math.ceil(clock.now().getTime() / 60_000) * 60_000));
    const start = clock.now();
    const local = (t: Date) => new Date(t.getTime() + HOUR).toISOString().slice(0, 16);
    await knex()('sites').insert({
      id: siteId,
      account_id: a.accountId,
      name: 'Freeze HQ',
      time_zone: 'Europe/Berlin',
      freezes: JSON.stringify([
        {
          from: local(new Date(start.getTime() - HOUR)),
          to: local(new Date(start.getTime() + HOUR)),
          reason: 'opening',
        },
      ]),
    });
    await knex()('devices').where({ serial: 'FROZEN-1' }).update({ site_id: siteId });
    const id = await deploy({ serials: ['FROZEN-1'] });
    await ota().runNow();
    expect(dev.commands()).toHaveLength(0);
    expect((await updateOf(id, 'FROZEN-1')).held).toEqual({
      reason: 'site_frozen',
      until: new Date(start.getTime() + HOUR).toISOString(),
    });
    expect((await deployment(a, id)).held).toMatchObject({ count: 1, reasons: { site_frozen: 1 } });
    clock.advance(HOUR);
    await dev.alive();
    await ota().runNow();
    await expect.poll(() => dev.commands().length, poll).toBe(1);
  });

  it("a device cannot lock another account's device (the topic ACL refuses another serial's ota/lock)", async () => {
    const victim = await claim(a, 'VICTIM-1');
    const attacker = await claim(other, 'ATTACKER-1');
    const devVictim = await connect(a, victim);
    const devAttacker = await connect(other, attacker);
    await devAttacker.client.publishAsync(
      topics.otaLock('VICTIM-1'),
      JSON.stringify({ for_s: 3600, reason: 'other' }),
      {
        qos: 1,
      },
    );
    await server.service.ingest.flush();
    await expect
      .poll(async () => (await other.api.get('/api/v1/devices/ATTACKER-1')).body.refused_messages, poll)
      .toEqual({ topic_not_allowed: 1 });
    expect(await lockRow('VICTIM-1')).toBeUndefined();
    await deploy({ serials: ['VICTIM-1'] });
    await expect.poll(() => devVictim.commands().length, poll).toBe(1);
  });
});
