import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import {
  claimForMqtt,
  connectDevice,
  refusalCode,
  collect,
  closed,
  heartbeat,
  type DeviceCreds,
} from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ifStarted } from '../helpers/teardown';

/**
 * Device authentication and the delivery guards of protocol v1 on the wire, with real mqtt.js
 * clients and the service behind the broker. The topic ACL's rules (what a device may subscribe
 * to and publish) are shown over an in-memory broker in acl-rules.test.ts.
 */
describe('MQTT authentication and ACL', () => {
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  let a: DeviceCreds;
  let b: DeviceCreds;
  let creds: DeviceCreds[];

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    url = server.service.mqttUrl!;
    creds = await claimForMqtt(server, account, ['ACL-A', 'ACL-B', 'ACL-ROT', 'ACL-GONE', 'ACL-TAKE'], {
      firmware: null,
    });
    [a, b] = creds as [DeviceCreds, DeviceCreds];
    // Generous: the embedded database starts slowly on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const metric = async (name: string) => {
    const text = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    return text.split('\n').filter((l) => l.startsWith(name));
  };

  it('accepts a claimed device with its password, also over WebSocket on /mqtt', async () => {
    const tcp = await connectDevice(url, a);
    expect(tcp.connected).toBe(true);
    await tcp.endAsync();
    const ws = await connectDevice(`ws://127.0.0.1:${server.service.httpPort}/mqtt`, a);
    expect(ws.connected).toBe(true);
    await ws.endAsync();
  });

  it('refuses a wrong password, an unclaimed serial, a mismatched username and an empty client id; counts and reports them', async () => {
    expect(await refusalCode(url, { ...a, password: 'wrong' })).toBe(4);
    expect(await refusalCode(url, { ...a, password: '' })).toBe(4);
    // Not claimed: 5 (not authorized), so the device backs off long instead of trying other secrets.
    expect(await refusalCode(url, { serial: 'NOT-CLAIMED', username: 'NOT-CLAIMED', password: a.password })).toBe(5);
    expect(await refusalCode(url, { ...a, username: b.username, password: b.password })).toBe(2);
    expect(await refusalCode(url, { ...a, serial: '' }, { clientId: '', clean: true })).toBe(2);
    const lines = await metric('fleet_mqtt_connections_refused_total');
    expect(lines.join('\n')).toMatch(/reason="bad_password"} [2-9]/);
    expect(lines.join('\n')).toMatch(/reason="unknown_serial"} 1/);
    expect(lines.join('\n')).toMatch(/reason="invalid_client"}/);
    expect(lines.join('\n')).toMatch(/reason="empty_client_id"}/);
  });

  it('rotation refuses the old password at once and disconnects the connected device', async () => {
    const old = creds.find((c) => c.serial === 'ACL-ROT')!;
    const device = await connectDevice(url, old);
    const res = await account.api.post('/api/v1/devices/ACL-ROT/credentials');
    expect(res.status).toBe(201);
    expect(await closed(device)).toBe(true);
    device.end(true);
    expect(await refusalCode(url, old)).toBe(4);
    const fresh = await connectDevice(url, { ...old, password: res.body.password });
    await fresh.endAsync();
  });

  it('unclaiming disconnects the device and refuses it afterwards', async () => {
    const gone = creds.find((c) => c.serial === 'ACL-GONE')!;
    const device = await connectDevice(url, gone);
    expect((await account.api.delete('/api/v1/devices/ACL-GONE')).status).toBe(204);
    expect(await closed(device)).toBe(true);
    device.end(true);
    expect(await refusalCode(url, gone)).toBe(5);
  });

  it('a device cannot subscribe to another device or to wildcards, and receives nothing from them', async () => {
    const spy = await connectDevice(url, a);
    const seen = collect(spy);
    const filters = [
      topics.ota(b.serial),
      topics.config(b.serial),
      'devices/#',
      '#',
      'devices/+/ota',
      'devices/+/config',
      `devices/${b.serial}/#`,
      '$SYS/#',
      topics.heartbeat(b.serial),
    ];
    // mqtt.js rejects subscribeAsync when every filter is refused, so read the SUBACK by callback.
    const suback = new Promise<number[]>((resolve) =>
      spy.on('packetreceive', (p) => p.cmd === 'suback' && resolve(p.granted as number[])),
    );
    spy.subscribe(filters, { qos: 1 }, () => undefined);
    expect(await suback).toEqual(filters.map(() => 128));
    // The service publishes to B (config retained, an OTA command) and B itself heartbeats.
    const other = await connectDevice(url, b);
    await other.subscribeAsync([topics.ota(b.serial), topics.config(b.serial)], { qos: 1 });
    const received = collect(other);
    await server.service.services.gateway.publishConfig(b.serial, { version: 1, config: { dim_level: 40 } });
    await server.service.services.gateway.publishOta(b.serial, {
      jobId: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11',
      version: '1.1.0',
      model: 'LX-200',
      url: 'http://127.0.0.1/x',
      sha256: 'a'.repeat(64),
      size: 1,
    });
    await other.publishAsync(topics.heartbeat(b.serial), heartbeat(), { qos: 1 });
    await expect
      .poll(
        () =>
          received.some((m) => m.topic === topics.ota(b.serial)) &&
          received.some((m) => m.payload.includes('"dim_level":40')),
        { timeout: 3000 },
      )
      .toBe(true);
    // Give a wrongly granted subscription every chance to deliver before asserting silence.
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).toEqual([]);
    expect(spy.connected).toBe(true);
    await spy.endAsync();
    await other.endAsync();
    expect((await metric('fleet_mqtt_authorization_denied_total')).join('\n')).toMatch(/action="subscribe"} 9/);
  });

  it('a second connection with the same client id takes over cleanly: the first is closed, the device stays online', async () => {
    const take = creds.find((c) => c.serial === 'ACL-TAKE')!;
    const first = await connectDevice(url, take);
    await first.publishAsync(topics.heartbeat(take.serial), heartbeat(), { qos: 1 });
    await expect
      .poll(async () => (await account.api.get('/api/v1/devices/ACL-TAKE')).body.status, { timeout: 5000 })
      .toBe('online');
    const firstClosed = closed(first);
    const second = await connectDevice(url, take);
    expect(await firstClosed).toBe(true);
    first.end(true);
    await second.publishAsync(topics.heartbeat(take.serial), heartbeat({ uptime_s: 5 }), { qos: 1 });
    await expect
      .poll(async () => (await account.api.get('/api/v1/devices/ACL-TAKE')).body.uptime_s, { timeout: 5000 })
      .toBe(5);
    const device = (await account.api.get('/api/v1/devices/ACL-TAKE')).body;
    expect(device.status).toBe('online');
    // No offline blip in the history: the takeover is not a disconnect.
    const history = (await account.api.get('/api/v1/devices/ACL-TAKE/history')).body;
    const statuses = (history.events ?? history.items ?? []).filter(
      (e: { type: string }) => e.type === 'status_changed',
    );
    expect(statuses.map((e: { data: { to: string } }) => e.data.to)).toEqual(['online']);
    await second.endAsync();
  });
});
