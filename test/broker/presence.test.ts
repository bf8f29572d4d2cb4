import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import net from 'node:net';
import mqttPacket from 'mqtt-packet';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, heartbeat, closed, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ManualClock } from '#core/shared/clock';
import { ifStarted } from '../helpers/teardown';

/**
 * Heartbeats, status and presence: what the REST API shows after devices talk, and the history
 * and outbox rows every change writes. The clock is injected: timeouts are reached by moving it.
 */
describe('heartbeats and presence', () => {
  const clock = new ManualClock('2026-03-01T10:00:00Z');
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  let creds: Map<string, DeviceCreds>;

  beforeAll(async () => {
    server = await startTestServer({ clock });
    account = await server.createAccount();
    url = server.service.mqttUrl!;
    const list = await claimForMqtt(
      server,
      account,
      [
        'P-HB',
        'P-WILL',
        'P-KA',
        'P-TIMEOUT',
        'P-BYE',
        'P-RESTART',
        'P-USB',
        'P-CFG',
        'P-BAD',
        'P-FLOOD',
        'P-STEADY',
        'P-WIRED',
      ],
      { firmware: null },
    );
    creds = new Map(list.map((c) => [c.serial, c]));
    // Generous: the embedded database starts slowly on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const device = async (serial: string) => (await account.api.get(`/api/v1/devices/${serial}`)).body;
  const history = async (serial: string) =>
    (await account.api.get(`/api/v1/devices/${serial}/history`)).body.events as Array<{
      type: string;
      data: Record<string, unknown>;
    }>;
  const outbox = (serial: string) =>
    server.service.database.knex('events').where({ subject: serial }).orderBy('seq').select('type', 'data');
  const flush = () => server.service.ingest.flush();

  it('a heartbeat makes the device online with its ip, firmware and telemetry; history and outbox record it', async () => {
    expect((await device('P-HB')).status).toBe('offline');
    const dev = await connectDevice(url, creds.get('P-HB')!);
    await dev.publishAsync(
      topics.heartbeat('P-HB'),
      heartbeat({ firmware: '1.0.0', ip: '10.0.4.17', uptime_s: 3600, rssi: -61 }),
      { qos: 1 },
    );
    await flush();
    const d = await device('P-HB');
    expect(d).toMatchObject({
      status: 'online',
      connectivity: 'online',
      ip: '10.0.4.17',
      firmware: '1.0.0',
      uptime_s: 3600,
      rssi: -61,
    });
    expect(d.last_seen).toBe(clock.now().toISOString());
    expect((await history('P-HB')).map((e) => e.type)).toEqual(
      expect.arrayContaining(['status_changed', 'firmware_changed']),
    );
    expect((await outbox('P-HB')).map((e) => e.type)).toContain('device.online');
    await dev.endAsync();
    await expect.poll(async () => (await device('P-HB')).status).toBe('offline');
    const events = await outbox('P-HB');
    expect(events.map((e) => e.type).slice(-1)).toEqual(['device.offline']);
    expect(events.at(-1)!.data).toMatchObject({ serial: 'P-HB', reason: 'disconnected' });
  });

  it('many heartbeats in a window are coalesced: the latest values win', async () => {
    const dev = await connectDevice(url, creds.get('P-HB')!);
    for (let i = 1; i <= 10; i++) dev.publish(topics.heartbeat('P-HB'), heartbeat({ uptime_s: i }), { qos: 0 });
    await dev.publishAsync(topics.heartbeat('P-HB'), heartbeat({ uptime_s: 11, ip: '10.0.0.9' }), { qos: 1 });
    await flush();
    expect(await device('P-HB')).toMatchObject({ uptime_s: 11, ip: '10.0.0.9', status: 'online' });
    await dev.endAsync();
  });

  it('the Last Will of a connection that dies marks the device offline', async () => {
    const dev = await connectDevice(url, creds.get('P-WILL')!);
    await dev.publishAsync(topics.heartbeat('P-WILL'), heartbeat(), { qos: 1 });
    await flush();
    expect((await device('P-WILL')).status).toBe('online');
    dev.stream.destroy();
    await expect.poll(async () => (await device('P-WILL')).status, { timeout: 5000 }).toBe('offline');
    const last = (await history('P-WILL'))[0]!;
    expect(last).toMatchObject({
      type: 'status_changed',
      data: { from: 'online', to: 'offline', reason: 'last_will' },
    });
    dev.end(true);
  });

  it('a graceful {"state":"offline"} status marks the device offline', async () => {
    const dev = await connectDevice(url, creds.get('P-BYE')!);
    await dev.publishAsync(topics.status('P-BYE'), JSON.stringify({ state: 'online' }), { qos: 1 });
    await flush();
    expect((await device('P-BYE')).status).toBe('online');
    await dev.publishAsync(topics.status('P-BYE'), JSON.stringify({ state: 'offline' }), { qos: 1 });
    await flush();
    expect((await device('P-BYE')).status).toBe('offline');
    await dev.endAsync();
  });

  it('a connection that stops answering (keepalive timeout) goes offline as keepalive_timeout, Will or not', async () => {
    const c = creds.get('P-KA')!;
    // A raw client with keepalive 1 s that never sends PINGREQ: Aedes closes it after 1.5 s and
    // publishes its Will (as every device sets one), which must not hide why it went away.
    const socket = net.connect(server.service.mqttPort!, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(
      mqttPacket.generate({
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 4,
        clean: true,
        clientId: c.serial,
        username: c.username,
        password: Buffer.from(c.password),
        keepalive: 1,
        will: { topic: topics.status(c.serial), payload: Buffer.from('{"state":"offline"}'), qos: 1, retain: false },
      }),
    );
    socket.write(
      mqttPacket.generate({
        cmd: 'publish',
        topic: topics.heartbeat(c.serial),
        payload: Buffer.from(heartbeat()),
        qos: 0,
        dup: false,
        retain: false,
      }),
    );
    await expect.poll(async () => (await device('P-KA')).status, { timeout: 5000 }).toBe('online');
    await expect.poll(async () => (await device('P-KA')).status, { timeout: 6000 }).toBe('offline');
    expect((await history('P-KA'))[0]!.data).toMatchObject({ to: 'offline', reason: 'keepalive_timeout' });
    socket.destroy();
  });

  it('three missed heartbeat intervals mark a still-connected device offline; the next heartbeat brings it back', async () => {
    const dev = await connectDevice(url, creds.get('P-TIMEOUT')!);
    await dev.publishAsync(topics.heartbeat('P-TIMEOUT'), heartbeat(), { qos: 1 });
    await flush();
    expect((await device('P-TIMEOUT')).status).toBe('online');
    // Its configured interval is 60 s: 2.5 intervals is not enough, 3 is.
    clock.advance(150_000);
    await server.service.broker.settlePresenceSweep();
    expect((await device('P-TIMEOUT')).status).toBe('online');
    clock.advance(31_000);
    await server.service.broker.settlePresenceSweep();
    expect((await device('P-TIMEOUT')).status).toBe('offline');
    expect((await history('P-TIMEOUT'))[0]!.data).toMatchObject({ to: 'offline', reason: 'heartbeat_timeout' });
    expect((await outbox('P-TIMEOUT')).map((e) => e.type).slice(-1)).toEqual(['device.offline']);
    await dev.publishAsync(topics.heartbeat('P-TIMEOUT'), heartbeat(), { qos: 1 });
    await flush();
    expect((await device('P-TIMEOUT')).status).toBe('online');
    await dev.endAsync();
  });

  it('a device heartbeating steadily is never swept; once silent it goes offline exactly 3 intervals after its last heartbeat', async () => {
    // The stored deadline moves only by whole intervals (HOT updates), so the sweep must check
    // the exact one: heartbeats every 50 s of a 60 s interval, a sweep after each.
    const dev = await connectDevice(url, creds.get('P-STEADY')!);
    for (let i = 0; i < 8; i++) {
      await dev.publishAsync(topics.heartbeat('P-STEADY'), heartbeat(), { qos: 1 });
      await flush();
      clock.advance(50_000);
      await server.service.broker.settlePresenceSweep();
      expect((await device('P-STEADY')).status).toBe('online');
    }
    // Silent since 50 s ago: still online at 179 s, offline past 180 s.
    clock.advance(129_000);
    await server.service.broker.settlePresenceSweep();
    expect((await device('P-STEADY')).status).toBe('online');
    clock.advance(2_000);
    await server.service.broker.settlePresenceSweep();
    expect((await device('P-STEADY')).status).toBe('offline');
    expect((await history('P-STEADY'))[0]!.data).toMatchObject({ to: 'offline', reason: 'heartbeat_timeout' });
    await dev.endAsync();
  });

  it('updating while an update is in progress and connected; online again when it is cleared', async () => {
    const dev = await connectDevice(url, creds.get('P-HB')!);
    await flush();
    const knex = server.service.database.knex;
    // current_update_id belongs to the OTA engine; here it is set by hand.
    await knex('devices')
      .where({ serial: 'P-HB' })
      .update({ current_update_id: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11' });
    await dev.publishAsync(topics.heartbeat('P-HB'), heartbeat(), { qos: 1 });
    await flush();
    expect((await device('P-HB')).status).toBe('updating');
    await dev.endAsync();
    await expect.poll(async () => (await device('P-HB')).status).toBe('offline');
    await knex('devices').where({ serial: 'P-HB' }).update({ current_update_id: null });
  });

  it('firmware that changed without an update in progress is recorded as changed outside OTA', async () => {
    const dev = await connectDevice(url, creds.get('P-USB')!);
    await dev.publishAsync(topics.heartbeat('P-USB'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await flush();
    await dev.publishAsync(topics.heartbeat('P-USB'), heartbeat({ firmware: '1.2.0' }), { qos: 1 });
    await flush();
    expect((await device('P-USB')).firmware).toBe('1.2.0');
    expect((await history('P-USB'))[0]).toMatchObject({
      type: 'firmware_changed_outside_ota',
      data: { from: '1.0.0', to: '1.2.0' },
    });
    await dev.endAsync();
  });

  it('restart reconciliation: devices left online by a previous run are offline after start, with history and events', async () => {
    const dev = await connectDevice(url, creds.get('P-RESTART')!);
    await dev.publishAsync(topics.heartbeat('P-RESTART'), heartbeat(), { qos: 1 });
    await flush();
    expect((await device('P-RESTART')).status).toBe('online');
    // A crash (kill -9) leaves the row online: the process never saw the disconnect.
    server.service.ingest.offline = () => undefined;
    await server.restart();
    dev.end(true);
    expect(await device('P-RESTART')).toMatchObject({ status: 'offline', connectivity: 'offline' });
    expect((await history('P-RESTART'))[0]).toMatchObject({
      type: 'status_changed',
      data: { from: 'online', to: 'offline', reason: 'service_restart' },
    });
    expect((await outbox('P-RESTART')).map((e) => e.type).slice(-1)).toEqual(['device.offline']);
    url = server.service.mqttUrl!;
  });

  it('each heartbeat field is optional: a wired module without rssi, or a bare sign of life, records what it sends', async () => {
    const dev = await connectDevice(url, creds.get('P-WIRED')!);
    await dev.publishAsync(
      topics.heartbeat('P-WIRED'),
      JSON.stringify({ firmware: '1.2.0', ip: '10.0.9.4', uptime_s: 60 }),
      { qos: 1 },
    );
    await flush();
    expect(await device('P-WIRED')).toMatchObject({
      status: 'online',
      firmware: '1.2.0',
      ip: '10.0.9.4',
      uptime_s: 60,
      rssi: null,
    });
    await dev.publishAsync(topics.heartbeat('P-WIRED'), JSON.stringify({ firmware: '1.2.1' }), { qos: 1 });
    await flush();
    expect(await device('P-WIRED')).toMatchObject({ firmware: '1.2.1', ip: '10.0.9.4', uptime_s: 60, rssi: null });
    clock.advance(30_000);
    await dev.publishAsync(topics.heartbeat('P-WIRED'), '{}', { qos: 1 });
    await flush();
    const after = await device('P-WIRED');
    expect(after).toMatchObject({ status: 'online', firmware: '1.2.1', ip: '10.0.9.4' });
    expect(after.last_seen).toBe(clock.now().toISOString());
    await dev.endAsync();
  });

  it('payloads that are not JSON objects are dropped and counted; bad heartbeat fields are refused one by one and change nothing', async () => {
    const dev = await connectDevice(url, creds.get('P-BAD')!);
    await dev.publishAsync(topics.heartbeat('P-BAD'), heartbeat({ firmware: '2.0.0', ip: '10.1.1.1' }), { qos: 1 });
    await flush();
    const before = await device('P-BAD');
    // Dropped whole: not a JSON object (invalid UTF-8 is not JSON), or too large to read.
    const dropped = [
      'not json',
      '[1,2,3]',
      'null',
      heartbeat({ pad: 'x'.repeat(5000) }),
      Buffer.from([0xff, 0xfe, 0x00]),
    ];
    // Read field by field: each of these carries one bad field and nothing else, so nothing changes.
    const badFields = [
      { ip: '999.1.1.1' },
      { ip: '10.0.0.1; DROP TABLE devices' },
      { firmware: 'latest' },
      { rssi: 50 },
      { uptime_s: -1 },
      { uptime_s: 1e12 },
      { rssi: 'strong' },
    ];
    for (const payload of dropped) await dev.publishAsync(topics.heartbeat('P-BAD'), payload, { qos: 1 });
    for (const fields of badFields)
      await dev.publishAsync(topics.heartbeat('P-BAD'), JSON.stringify(fields), { qos: 1 });
    await dev.publishAsync(topics.status('P-BAD'), JSON.stringify({ state: 'asleep' }), { qos: 1 });
    await dev.publishAsync(topics.configReported('P-BAD'), JSON.stringify({ version: 'seven' }), { qos: 1 });
    await dev.publishAsync(topics.otaProgress('P-BAD'), JSON.stringify({ job_id: 'x', state: 'exploded' }), { qos: 1 });
    await flush();
    expect(dev.connected).toBe(true);
    const after = await device('P-BAD');
    expect(after).toMatchObject({
      firmware: '2.0.0',
      ip: '10.1.1.1',
      uptime_s: before.uptime_s,
      rssi: before.rssi,
      status: 'online',
      firmware_reported_invalid: 'latest',
      refused_messages: { not_json: 2, not_object: 2, too_large: 1, invalid: 3 },
      refused_fields: {
        ip: { count: 2, reason: 'invalid_format', value: '10.0.0.1; DROP TABLE devices' },
        firmware: { count: 1, reason: 'invalid_format', value: 'latest' },
        rssi: { count: 2, reason: 'wrong_type', value: 'strong' },
        uptime_s: { count: 2, reason: 'out_of_range', value: '1000000000000' },
      },
    });
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    const count = (prefix: string) =>
      metrics
        .split('\n')
        .filter((l) => l.startsWith(prefix))
        .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
    expect(count('fleet_mqtt_messages_dropped_total{kind="heartbeat"')).toBeGreaterThanOrEqual(dropped.length);
    expect(count('fleet_heartbeat_fields_refused_total{')).toBeGreaterThanOrEqual(badFields.length);
    expect(metrics).toMatch(/fleet_mqtt_messages_dropped_total\{kind="heartbeat",reason="too_large"\} [1-9]/);
    await dev.endAsync();
  });

  it('a flooding device is throttled, then disconnected; other devices are unaffected', async () => {
    const flooder = await connectDevice(url, creds.get('P-FLOOD')!);
    const neighbour = await connectDevice(url, creds.get('P-BAD')!);
    const gone = closed(flooder, 10_000);
    for (let i = 0; i < 400 && flooder.connected; i++)
      flooder.publish(topics.heartbeat('P-FLOOD'), heartbeat({ uptime_s: i }), { qos: 0 });
    expect(await gone).toBe(true);
    flooder.end(true);
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/fleet_mqtt_messages_dropped_total\{kind="heartbeat",reason="rate_limited"\} [1-9]/);
    await neighbour.publishAsync(topics.heartbeat('P-BAD'), heartbeat({ uptime_s: 77 }), { qos: 1 });
    await flush();
    expect((await device('P-BAD')).uptime_s).toBe(77);
    await neighbour.endAsync();
  });
});
