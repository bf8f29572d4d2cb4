import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, heartbeat, type DeviceCreds } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ManualClock } from '#core/shared/clock';
import { ifStarted } from '../helpers/teardown';

/**
 * Two clocks (docs/device-protocol.md, "Presence and status"): `last_seen` is the time of the
 * last heartbeat (the owner's specification), while a connection, a status `online` or a
 * heartbeat keeps a connected device online. Real mqtt.js clients; the clock is injected and
 * the presence deadline (3 heartbeat intervals of 60 s) is reached by moving it.
 */
describe('last_seen is the time of the last heartbeat; presence follows any sign of life', () => {
  const clock = new ManualClock('2026-11-27T05:00:00Z');
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  let creds: Map<string, DeviceCreds>;

  beforeAll(async () => {
    server = await startTestServer({ clock });
    account = await server.createAccount();
    url = server.service.mqttUrl!;
    const list = await claimForMqtt(server, account, ['LS-NEW', 'LS-HB', 'LS-STATUS', 'LS-SILENT', 'LS-BACK'], {
      firmware: null,
    });
    creds = new Map(list.map((c) => [c.serial, c]));
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const device = async (serial: string) =>
    (await account.api.get(`/api/v1/devices/${serial}`)).body as { status: string; last_seen: string | null };
  const flush = () => server.service.ingest.flush();
  const sweep = () => server.service.broker.settlePresenceSweep();
  /** Connects and waits until the connection is written (the broker hands it to the ingest after CONNACK). */
  const connect = async (serial: string): Promise<MqttClient> => {
    const dev = await connectDevice(url, creds.get(serial)!);
    await expect
      .poll(async () => {
        await flush();
        return (await device(serial)).status;
      })
      .toBe('online');
    return dev;
  };
  const beat = async (dev: MqttClient, serial: string) => {
    await dev.publishAsync(topics.heartbeat(serial), heartbeat(), { qos: 1 });
    await flush();
  };

  it('a device that connected but has not sent a heartbeat is online with last_seen null', async () => {
    const dev = await connect('LS-NEW');
    expect(await device('LS-NEW')).toMatchObject({ status: 'online', last_seen: null });
    // A heartbeat moves it.
    clock.advance(5_000);
    await beat(dev, 'LS-NEW');
    expect(await device('LS-NEW')).toMatchObject({ status: 'online', last_seen: clock.now().toISOString() });
    await dev.endAsync();
  });

  it('a reconnection keeps the previous heartbeat time; the next heartbeat moves it', async () => {
    let dev = await connect('LS-HB');
    await beat(dev, 'LS-HB');
    const beatAt = clock.now().toISOString();
    await dev.endAsync();
    await expect.poll(async () => (await device('LS-HB')).status).toBe('offline');
    clock.advance(600_000);
    dev = await connect('LS-HB');
    expect(await device('LS-HB')).toMatchObject({ status: 'online', last_seen: beatAt });
    clock.advance(1_000);
    await beat(dev, 'LS-HB');
    expect((await device('LS-HB')).last_seen).toBe(clock.now().toISOString());
    await dev.endAsync();
  });

  it('a status online message keeps the device online without moving last_seen', async () => {
    const dev = await connect('LS-STATUS');
    await beat(dev, 'LS-STATUS');
    const beatAt = clock.now().toISOString();
    // Only status messages from now on, each within an interval of the one before: past 3
    // intervals after the heartbeat, still online, still showing the heartbeat's time.
    for (let i = 0; i < 5; i++) {
      clock.advance(50_000);
      await dev.publishAsync(topics.status('LS-STATUS'), JSON.stringify({ state: 'online' }), { qos: 1 });
      await flush();
      await sweep();
      expect(await device('LS-STATUS')).toMatchObject({ status: 'online', last_seen: beatAt });
    }
    // Then silent: offline 3 intervals after the last status message, not after the heartbeat.
    clock.advance(179_000);
    await sweep();
    expect((await device('LS-STATUS')).status).toBe('online');
    clock.advance(2_000);
    await sweep();
    expect(await device('LS-STATUS')).toMatchObject({ status: 'offline', last_seen: beatAt });
    await dev.endAsync();
  });

  it('a connected device silent for 3 intervals goes offline, counted from its connection, without a heartbeat', async () => {
    const dev = await connect('LS-SILENT');
    clock.advance(179_000);
    await sweep();
    expect((await device('LS-SILENT')).status).toBe('online');
    clock.advance(2_000);
    await sweep();
    expect(await device('LS-SILENT')).toMatchObject({ status: 'offline', last_seen: null });
    const [last] = (await account.api.get('/api/v1/devices/LS-SILENT/history')).body.events as Array<{
      data: Record<string, unknown>;
    }>;
    expect(last!.data).toMatchObject({ to: 'offline', reason: 'heartbeat_timeout' });
    await dev.endAsync();
  });

  it('a device that keeps reconnecting and heartbeating stays online; last_seen follows its heartbeats', async () => {
    for (let i = 0; i < 4; i++) {
      const dev = await connect('LS-BACK');
      clock.advance(20_000);
      await beat(dev, 'LS-BACK');
      const beatAt = clock.now().toISOString();
      clock.advance(30_000);
      await sweep();
      expect(await device('LS-BACK')).toMatchObject({ status: 'online', last_seen: beatAt });
      await dev.endAsync();
      await expect.poll(async () => (await device('LS-BACK')).status).toBe('offline');
    }
    // A reconnection after a long absence: online at once, with the heartbeat time of before.
    const before = (await device('LS-BACK')).last_seen;
    clock.advance(3_600_000);
    const dev = await connect('LS-BACK');
    await sweep();
    expect(await device('LS-BACK')).toMatchObject({ status: 'online', last_seen: before });
    await dev.endAsync();
  });
});
