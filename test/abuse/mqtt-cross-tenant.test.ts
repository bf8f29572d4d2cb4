import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, collect, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';

/**
 * A device of one account must never receive another account's MQTT traffic, whatever it asks
 * for: Aedes 1.2 stores every filter of a SUBSCRIBE of a persistent session when one of them is
 * allowed, denied ones included, and queued messages matching them for the session while it was
 * offline. Repro of the probe: EVIL (account A) subscribes to ['#', its own ota] once,
 * disconnects; account B changes a device's configuration and a B device with a pending update
 * connects; EVIL comes back and must get nothing of B's.
 */
describe('MQTT isolation between accounts', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
    // B's devices get a real update when they connect: a firmware binary to send.
    expect((await b.api.post('/api/v1/models', { name: 'LX-B' })).status).toBe(201);
    await uploadFirmware(b, { model: 'LX-B', version: '1.0.0', expectStatus: 201 });
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const subscribeRaw = (client: MqttClient, filters: string[], qos: 0 | 1 | 2 = 1) =>
    new Promise<number[]>((resolve) => {
      client.once('packetreceive', function onPacket(p) {
        if (p.cmd === 'suback') resolve(p.granted as number[]);
        else client.once('packetreceive', onPacket);
      });
      // mqtt.js rejects a SUBSCRIBE whose filters were all refused: read the SUBACK itself.
      client.subscribe(filters, { qos }, () => undefined);
    });

  type Store = {
    addSubscriptions(c: { id: string }, s: unknown[]): Promise<void>;
    subscriptionsByClient(c: { id: string }): Promise<Array<{ topic: string }> | null>;
  };
  const store = () => (server.service.broker as unknown as { aedes: { persistence: Store } }).aedes.persistence;
  const storedFilters = async (serial: string) =>
    ((await store().subscriptionsByClient({ id: serial })) ?? []).map((s) => s.topic).sort();

  const foreign = (seen: Array<{ topic: string }>, own: string) =>
    seen.filter((m) => !m.topic.startsWith(`devices/${own}/`));

  for (const transport of ['tcp', 'websocket'] as const) {
    it(`a denied filter of a mixed SUBSCRIBE is neither stored nor matched (${transport})`, async () => {
      const tag = transport === 'tcp' ? 'T' : 'W';
      const url = transport === 'tcp' ? server.service.mqttUrl! : `ws://127.0.0.1:${server.service.httpPort}/mqtt`;
      const [evil] = await claimForMqtt(server, a, [`EVIL-${tag}`], { firmware: null });
      const [victim, idle] = await claimForMqtt(server, b, [`VICTIM-${tag}`, `IDLE-${tag}`], { model: 'LX-B' });
      const e = evil!;

      const first = await connectDevice(url, e);
      expect(await subscribeRaw(first, ['#', topics.ota(e.serial)])).toEqual([128, 1]);
      await first.endAsync();
      expect(await storedFilters(e.serial)).toEqual([topics.ota(e.serial)]);

      // Account B: a configuration change for a device that is away, and a device whose
      // claim-time update is sent when it connects.
      expect((await b.api.patch(`/api/v1/devices/${idle!.serial}`, { config: { dim_level: 17 } })).status).toBe(200);
      const v = await connectDevice(url, victim!);
      const victimSeen = collect(v);
      await v.subscribeAsync([topics.ota(victim!.serial), topics.config(victim!.serial)], { qos: 1 });
      await v.publishAsync(topics.heartbeat(victim!.serial), heartbeat({ firmware: '0.9.0' }), { qos: 1 });
      await expect.poll(() => victimSeen.some((m) => m.topic === topics.ota(victim!.serial))).toBe(true);

      const again = await connectDevice(url, e);
      const seen = collect(again);
      // Also live: B publishes while EVIL is connected.
      expect((await b.api.patch(`/api/v1/devices/${idle!.serial}`, { config: { dim_level: 18 } })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1500));
      expect(foreign(seen, e.serial)).toEqual([]);
      await again.endAsync();
      await v.endAsync();
    });
  }

  it('grants QoS 1 at most: a QoS 2 request is answered 1 in the SUBACK', async () => {
    const [dev] = await claimForMqtt(server, a, ['QOS-CAP'], { firmware: null });
    const client = await connectDevice(server.service.mqttUrl!, dev!);
    expect(await subscribeRaw(client, [topics.ota(dev!.serial), topics.config(dev!.serial)], 2)).toEqual([1, 1]);
    await client.endAsync();
  });

  it('the delivery guard drops what a stored foreign subscription matches, counted', async () => {
    // A foreign filter stored before the storage guard existed (or by a future Aedes bug):
    // written under the guard, straight into the session store, as Aedes 1.2 did.
    const [evil] = await claimForMqtt(server, a, ['EVIL-STORED'], { firmware: null });
    const [other] = await claimForMqtt(server, b, ['OTHER-STORED'], { model: 'LX-B' });
    const e = evil!;
    const first = await connectDevice(server.service.mqttUrl!, e);
    expect(await subscribeRaw(first, [topics.ota(e.serial)])).toEqual([1]);
    await first.endAsync();
    const persistence = store();
    const unguarded = Object.getPrototypeOf(persistence) as Store;
    await unguarded.addSubscriptions.call(persistence, { id: e.serial }, [
      { topic: 'devices/+/config', qos: 1 },
      { topic: topics.ota(e.serial), qos: 1 },
    ]);

    expect((await b.api.patch(`/api/v1/devices/${other!.serial}`, { config: { dim_level: 33 } })).status).toBe(200);
    const again = await connectDevice(server.service.mqttUrl!, e);
    const seen = collect(again);
    expect((await b.api.patch(`/api/v1/devices/${other!.serial}`, { config: { dim_level: 34 } })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1500));
    expect(foreign(seen, e.serial)).toEqual([]);
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/fleet_mqtt_authorization_denied_total\{action="forward"\} [1-9]/);
    await again.endAsync();
  });
});
