import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, collect, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '../../broker/src/protocol/topics';

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
  afterAll(async () => server?.close());

  const device = async () => (await account.api.get('/api/v1/devices/CFG-1')).body;
  const configMessages = (seen: Array<{ topic: string; payload: string }>) =>
    seen.filter((m) => m.topic === topics.config('CFG-1')).map((m) => JSON.parse(m.payload) as { version: number; config: Record<string, unknown> });

  it('PATCH config reaches a connected device at once, retained; config/reported marks it applied', async () => {
    const dev = await connectDevice(server.service.mqttUrl!, creds);
    const seen = collect(dev);
    await dev.subscribeAsync([topics.config('CFG-1'), topics.ota('CFG-1')], { qos: 1 });
    const res = await account.api.patch('/api/v1/devices/CFG-1', { config: { dim_level: 40, heartbeat_interval_s: 30 } });
    expect(res.status).toBe(200);
    const version = res.body.config.desired_version as number;
    expect(res.body.config.in_sync).toBe(false);
    await expect.poll(() => configMessages(seen).some((m) => m.version === version)).toBe(true);
    expect(configMessages(seen).at(-1)!.config).toMatchObject({ dim_level: 40, heartbeat_interval_s: 30 });

    await dev.publishAsync(topics.configReported('CFG-1'), JSON.stringify({ version }), { qos: 1 });
    await expect.poll(async () => (await device()).config.in_sync).toBe(true);
    const d = await device();
    expect(d.config).toMatchObject({ reported_version: version, reported: { dim_level: 40, heartbeat_interval_s: 30 } });
    const history = (await account.api.get('/api/v1/devices/CFG-1/history')).body.events;
    expect(history.filter((e: { type: string }) => e.type === 'config_applied')).toEqual([expect.objectContaining({ data: { version } })]);
    const events = await server.service.database.knex('events').where({ subject: 'CFG-1', type: 'device.config_applied' });
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

  it('a device that (re)connects with a fresh session receives the desired configuration retained', async () => {
    const desired = (await device()).config.desired_version as number;
    const dev = await connectDevice(server.service.mqttUrl!, creds, { clean: true });
    const seen = collect(dev);
    await dev.subscribeAsync(topics.config('CFG-1'), { qos: 1 });
    await expect.poll(() => configMessages(seen).some((m) => m.version === desired)).toBe(true);
    expect(seen.find((m) => m.topic === topics.config('CFG-1'))!.retain).toBe(true);
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
