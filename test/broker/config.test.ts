import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, collect, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ifStarted } from '../helpers/teardown';

/** Configuration push (retained, QoS 1) and the device's report of what it applied. */
describe('device configuration over MQTT', () => {
  let server: TestServer;
  let account: TestAccount;
  let creds: DeviceCreds;

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    [creds] = (await claimForMqtt(server, account, ['CFG-1'], { firmware: null })) as [DeviceCreds];
    // Generous: the embedded database starts slowly on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const device = async () => (await account.api.get('/api/v1/devices/CFG-1')).body;
  const configMessages = (seen: Array<{ topic: string; payload: string }>) =>
    seen
      .filter((m) => m.topic === topics.config('CFG-1'))
      .map((m) => JSON.parse(m.payload) as { version: number; config: Record<string, unknown> });

  it('PATCH config reaches a connected device at once; config/reported marks it applied', async () => {
    const dev = await connectDevice(server.service.mqttUrl!, creds);
    const seen = collect(dev);
    await dev.subscribeAsync([topics.config('CFG-1'), topics.ota('CFG-1')], { qos: 1 });
    const res = await account.api.patch('/api/v1/devices/CFG-1', {
      config: { dim_level: 40, heartbeat_interval_s: 30 },
    });
    expect(res.status).toBe(200);
    const version = res.body.config.desired_version as number;
    expect(res.body.config.in_sync).toBe(false);
    await expect.poll(() => configMessages(seen).some((m) => m.version === version)).toBe(true);
    expect(configMessages(seen).at(-1)!.config).toMatchObject({ dim_level: 40, heartbeat_interval_s: 30 });

    await dev.publishAsync(topics.configReported('CFG-1'), JSON.stringify({ version }), { qos: 1 });
    await expect.poll(async () => (await device()).config.in_sync).toBe(true);
    const d = await device();
    expect(d.config).toMatchObject({
      reported_version: version,
      reported: { dim_level: 40, heartbeat_interval_s: 30 },
    });
    const history = (await account.api.get('/api/v1/devices/CFG-1/history')).body.events;
    expect(history.filter((e: { type: string }) => e.type === 'config_applied')).toEqual([
      expect.objectContaining({ data: { version } }),
    ]);
    const events = await server.service.database
      .knex('events')
      .where({ subject: 'CFG-1', type: 'device.config_applied' });
    expect(events).toHaveLength(1);
    await dev.endAsync();
  });

  it('a stale version report changes nothing', async () => {
    const res = await account.api.patch('/api/v1/devices/CFG-1', { config: { dim_level: 10 } });
    const version = res.body.config.desired_version as number;
    const dev = await connectDevice(server.service.mqttUrl!, creds);
    await dev.publishAsync(topics.configReported('CFG-1'), JSON.stringify({ version: version - 1 }), { qos: 1 });
    await dev.publishAsync(topics.configReported('CFG-1'), JSON.stringify({ version: version + 5 }), { qos: 1 });
    await new Promise((r) => setTimeout(r, 200));
    const d = await device();
    expect(d.config.in_sync).toBe(false);
    expect(d.config.reported_version).toBe(version - 1);
    await dev.endAsync();
  });

  it('a device that (re)connects with a fresh session receives the desired configuration, not retained', async () => {
    const desired = (await device()).config.desired_version as number;
    const dev = await connectDevice(server.service.mqttUrl!, creds, { clean: true });
    const seen = collect(dev);
    await dev.subscribeAsync(topics.config('CFG-1'), { qos: 1 });
    await expect.poll(() => configMessages(seen).some((m) => m.version === desired)).toBe(true);
    expect(seen.find((m) => m.topic === topics.config('CFG-1'))!.retain).toBe(false);
    await dev.endAsync();
  });

  it('each connection gets exactly one copy of the configuration, whatever its session held, with the service time', async () => {
    const [c] = (await claimForMqtt(server, account, ['CFG-3'], { firmware: null })) as [DeviceCreds];
    const configs = (seen: Array<{ topic: string; payload: string }>) =>
      seen
        .filter((m) => m.topic === topics.config('CFG-3'))
        .map((m) => JSON.parse(m.payload) as { version: number; server_time: string });
    const first = await connectDevice(server.service.mqttUrl!, c);
    await first.subscribeAsync(topics.config('CFG-3'), { qos: 1 });
    await account.api.patch('/api/v1/devices/CFG-3', { config: { dim_level: 20 } });
    await first.endAsync();
    // Changed while the device is away: what its persistent session holds, and what is sent on connect.
    await account.api.patch('/api/v1/devices/CFG-3', { config: { dim_level: 21 } });
    const desired = (await account.api.get('/api/v1/devices/CFG-3')).body.config.desired_version as number;
    // The usual device: clean=false, subscribes again on every connection. Then one that relies on
    // its restored subscription, and one with a fresh session.
    const rounds: Array<{ clean: boolean; subscribe: boolean }> = [
      { clean: false, subscribe: true },
      { clean: false, subscribe: true },
      { clean: false, subscribe: false },
      { clean: false, subscribe: true },
      { clean: true, subscribe: true },
      { clean: false, subscribe: true },
    ];
    const copies: number[] = [];
    for (const round of rounds) {
      const before = Date.now();
      const dev = await connectDevice(server.service.mqttUrl!, c, { clean: round.clean });
      const seen = collect(dev);
      if (round.subscribe) await dev.subscribeAsync(topics.config('CFG-3'), { qos: 1 });
      await expect.poll(() => configs(seen).length).toBeGreaterThan(0);
      // Time for a second copy (a queued one, a retained one, a publish on connect) to arrive.
      await new Promise((r) => setTimeout(r, 400));
      copies.push(configs(seen).length);
      const message = configs(seen)[0]!;
      expect(message.version).toBe(desired);
      const sentAt = Date.parse(message.server_time);
      expect(message.server_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(sentAt).toBeGreaterThanOrEqual(before - 1000);
      expect(sentAt).toBeLessThanOrEqual(Date.now() + 1000);
      await dev.endAsync();
    }
    expect(copies).toEqual(rounds.map(() => 1));
  });

  it("a device unclaimed and claimed again (here by another account) gets the new owner's configuration, never the previous owner's", async () => {
    const [first] = (await claimForMqtt(server, account, ['CFG-2'], { firmware: null })) as [DeviceCreds];
    const configs = (seen: Array<{ topic: string; payload: string }>) =>
      seen
        .filter((m) => m.topic === topics.config('CFG-2'))
        .map((m) => JSON.parse(m.payload) as { version: number; config: Record<string, unknown> });
    const old = await connectDevice(server.service.mqttUrl!, first);
    const oldSeen = collect(old);
    await old.subscribeAsync(topics.config('CFG-2'), { qos: 1 });
    const patched = await account.api.patch('/api/v1/devices/CFG-2', { config: { dim_level: 12 } });
    await expect.poll(() => configs(oldSeen).some((m) => m.version === patched.body.config.desired_version)).toBe(true);
    await old.endAsync();
    // Changed again while the device is away: retained, and queued in its persistent session.
    await account.api.patch('/api/v1/devices/CFG-2', { config: { dim_level: 13 } });
    expect((await account.api.delete('/api/v1/devices/CFG-2')).status).toBe(204);

    const other = await server.createAccount();
    const [again] = (await claimForMqtt(server, other, ['CFG-2'], { firmware: null })) as [DeviceCreds];
    const desired = (await other.api.get('/api/v1/devices/CFG-2')).body.config;
    const dev = await connectDevice(server.service.mqttUrl!, again);
    const seen = collect(dev);
    await dev.subscribeAsync(topics.config('CFG-2'), { qos: 1 });
    await expect.poll(() => configs(seen).some((m) => m.version === desired.desired_version)).toBe(true);
    // Give a late retained or queued message of the old session time to arrive.
    await new Promise((r) => setTimeout(r, 300));
    expect(
      configs(seen).every(
        (m) => m.version === desired.desired_version && m.config.dim_level === desired.desired.dim_level,
      ),
    ).toBe(true);
    await dev.endAsync();
  });

  it('after a service restart (retained messages lost with in-memory persistence) the configuration is still delivered', async () => {
    const desired = (await device()).config.desired_version as number;
    await server.restart();
    const dev = await connectDevice(server.service.mqttUrl!, creds, { clean: true });
    const seen = collect(dev);
    await dev.subscribeAsync(topics.config('CFG-1'), { qos: 1 });
    await expect.poll(() => configMessages(seen).map((m) => m.version)).toContain(desired);
    await dev.publishAsync(topics.configReported('CFG-1'), JSON.stringify({ version: desired }), { qos: 1 });
    await expect.poll(async () => (await device()).config.in_sync).toBe(true);
    await dev.endAsync();
  });
});
