import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from 'graphql-ws';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, heartbeat, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { wsClient, collect } from './graphql-client';
import { ifStarted } from '../helpers/teardown';

interface Change {
  data: {
    deviceChanged: {
      type: string;
      device: { serial: string; status: string; firmware: string | null; ip: string | null };
    };
  };
}

describe('subscriptions fed by real MQTT devices', () => {
  let server: TestServer;
  let account: TestAccount;
  let other: TestAccount;
  let creds: DeviceCreds[];
  let otherCreds: DeviceCreds[];
  const clients: Client[] = [];
  const devices: MqttClient[] = [];

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    other = await server.createAccount();
    creds = await claimForMqtt(server, account, ['MQ-1', 'MQ-2']);
    otherCreds = await claimForMqtt(server, other, ['MQ-OTHER']);
  });
  afterAll(async () => {
    for (const d of devices) await d.endAsync(true).catch(() => undefined);
    for (const c of clients) await c.dispose();
    await ifStarted(server)?.close();
  });

  it('a portal subscription sees a device come online and go offline within a second; another account sees nothing', async () => {
    const watcher = wsClient(server.service.httpUrl, { apiKey: account.apiKey });
    const stranger = wsClient(server.service.httpUrl, { apiKey: other.apiKey });
    clients.push(watcher, stranger);
    const mine = collect<Change>(
      watcher,
      'subscription { deviceChanged { type device { serial status firmware ip } } }',
    );
    const theirs = collect<Change>(stranger, 'subscription { deviceChanged { type device { serial } } }');
    await new Promise((r) => setTimeout(r, 300));

    let started = Date.now();
    const device = await connectDevice(server.service.mqttUrl!, creds[0]!);
    devices.push(device);
    await device.publishAsync(topics.heartbeat('MQ-1'), heartbeat({ firmware: '1.0.0', ip: '10.0.4.17' }), { qos: 1 });
    await mine.until(() => mine.items.some((i) => i.data.deviceChanged.type === 'device.online'), 1000);
    const onlineAfter = Date.now() - started;
    expect(onlineAfter).toBeLessThan(1000);
    await mine.until(() => mine.items.some((i) => i.data.deviceChanged.device.firmware === '1.0.0'), 1000);
    expect(mine.items.at(-1)!.data.deviceChanged.device).toMatchObject({
      serial: 'MQ-1',
      status: 'online',
      ip: '10.0.4.17',
    });

    started = Date.now();
    device.stream.destroy(); // abrupt loss: the broker publishes the Last Will
    await mine.until(() => mine.items.some((i) => i.data.deviceChanged.type === 'device.offline'), 1000);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(mine.items.at(-1)!.data.deviceChanged.device).toMatchObject({ serial: 'MQ-1', status: 'offline' });

    // The other account's device: only its owner hears about it.
    const foreign = await connectDevice(server.service.mqttUrl!, otherCreds[0]!);
    devices.push(foreign);
    await theirs.until(() => theirs.items.length >= 1, 1000);
    expect(theirs.items[0]!.data.deviceChanged.device.serial).toBe('MQ-OTHER');
    await new Promise((r) => setTimeout(r, 300));
    expect(mine.items.every((i) => i.data.deviceChanged.device.serial === 'MQ-1')).toBe(true);
    expect(theirs.items.every((i) => i.data.deviceChanged.device.serial === 'MQ-OTHER')).toBe(true);
  });
});
