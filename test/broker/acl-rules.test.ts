import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { topics } from '#protocol/topics';
import { REFUSED_PUBLISH_LIMIT, REFUSED_PUBLISH_WINDOW_S } from '#protocol/payloads';
import { closed, heartbeat } from '../helpers/mqtt';
import { startMemoryBroker, type MemoryBroker } from '../helpers/memory-broker';
import { ifStarted } from '../helpers/teardown';

/**
 * The broker's own rules, over a stub domain through in-memory streams (no database, no port):
 * what a device may subscribe to and publish, and what its messages become. Delivery guards with
 * the real service publishing, and authentication over TCP and WebSocket, stay on the wire
 * (auth-acl.test.ts).
 */
describe('broker rules: topic ACL and device messages', () => {
  let mem: MemoryBroker;
  const a = 'RULE-A';
  const b = 'RULE-B';

  beforeAll(async () => {
    mem = await startMemoryBroker({ [a]: 'secret-a', [b]: 'secret-b', 'RULE-C': 'secret-c', 'RULE-D': 'secret-d' });
  });
  afterAll(async () => ifStarted(mem)?.close());

  const counter = async (name: string) => (await mem.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];

  it('refuses a wrong password with CONNACK 4 and takes the right one', async () => {
    await expect(mem.connect(a, { password: 'wrong' })).rejects.toThrow(/Bad username or password|Not authorized/);
    const device = await mem.connect(a);
    expect(device.connected).toBe(true);
    await device.endAsync();
  });

  it('grants a device its own ota and config, at most QoS 1', async () => {
    const device = await mem.connect(a);
    const granted = await device.subscribeAsync([topics.ota(a), topics.config(a)], { qos: 2 });
    expect(granted.map((g) => g.qos)).toEqual([1, 1]);
    await device.endAsync();
  });

  it('refuses every filter outside its own ota and config with SUBACK 128 and stays connected', async () => {
    const device = await mem.connect(a);
    const filters = [topics.ota(b), topics.config(b), 'devices/#', '#', 'devices/+/ota', `devices/${b}/#`, '$SYS/#'];
    const suback = new Promise<number[]>((resolve) =>
      device.on('packetreceive', (p) => p.cmd === 'suback' && resolve(p.granted as number[])),
    );
    device.subscribe(filters, { qos: 1 }, () => undefined);
    expect(await suback).toEqual(filters.map(() => 128));
    expect(device.connected).toBe(true);
    await device.endAsync();
  });

  /** Resolves with the PUBACK, or 'no puback' when none came within `ms` (the connection was closed instead). */
  const acknowledged = (work: Promise<unknown>, ms = 2000) =>
    Promise.race([
      work.then(
        () => 'puback',
        () => 'no puback',
      ),
      new Promise((resolve) => setTimeout(() => resolve('no puback'), ms)),
    ]);
  /** What the handlers handed the domain about messages since `from` (not connects and readiness). */
  const news = (from: number) => mem.heard.slice(from).filter((h) => /^(refused|heartbeat|field) /.test(h));
  const metric = async (name: string) =>
    Object.fromEntries(
      (await counter(name)).map((v) => [Object.values(v.labels).join('/'), v.value] as [string, number]),
    );

  it.each([
    ['another device’s heartbeat', () => topics.heartbeat(b), 'other_device'],
    ['another device’s status', () => topics.status(b), 'other_device'],
    ['its own ota (service to device only)', () => topics.ota(a), 'service_to_device'],
    ['its own config (service to device only)', () => topics.config(a), 'service_to_device'],
    ['a topic outside the protocol', () => `devices/${a}/heartbeats`, 'not_a_device_topic'],
    ['a foreign root', () => 'lights/all/on', 'not_a_device_topic'],
  ])(
    'a QoS 1 publish to %s is acknowledged, dropped and counted; the device stays connected',
    async (_label, topicOf, reason) => {
      const device = await mem.connect(a);
      const before = (await metric('fleet_mqtt_publishes_refused_total'))[reason] ?? 0;
      const heard = mem.heard.length;
      expect(await acknowledged(device.publishAsync(topicOf(), heartbeat(), { qos: 1 }))).toBe('puback');
      expect(await closed(device, 300)).toBe(false);
      // Dropped: nothing reached a handler; counted for the device with its topic, and by reason.
      expect(news(heard)).toEqual([`refused ${a} topic_not_allowed ${topicOf()}`]);
      expect((await metric('fleet_mqtt_publishes_refused_total'))[reason]).toBe(before + 1);
      await device.endAsync();
    },
  );

  it('a refused QoS 0 publish is dropped and counted without closing the connection', async () => {
    const device = await mem.connect(a);
    const heard = mem.heard.length;
    await device.publishAsync(topics.status(b), '{"state":"offline"}', { qos: 0 });
    await device.publishAsync(topics.heartbeat(a), heartbeat(), { qos: 1 });
    expect(news(heard)).toEqual([
      `refused ${a} topic_not_allowed ${topics.status(b)}`,
      `heartbeat ${a} ${JSON.stringify(JSON.parse(heartbeat()))}`,
    ]);
    expect(device.connected).toBe(true);
    await device.endAsync();
  });

  it(`closes the connection only on a flood: the ${REFUSED_PUBLISH_LIMIT + 1}th refused publish within ${REFUSED_PUBLISH_WINDOW_S} s`, async () => {
    const device = await mem.connect('RULE-D');
    for (let i = 0; i < REFUSED_PUBLISH_LIMIT; i += 1)
      expect(await acknowledged(device.publishAsync(topics.heartbeat(b), heartbeat(), { qos: 1 }))).toBe('puback');
    expect(device.connected).toBe(true);
    device.publish(topics.heartbeat(b), heartbeat(), { qos: 0 });
    expect(await closed(device)).toBe(true);
    expect((await metric('fleet_mqtt_flood_disconnects_total'))['refused_publishes']).toBe(1);
    device.end(true);
  });

  it('a heartbeat with invalid fields is heard: its valid fields are handed on, each refused one counted', async () => {
    const device = await mem.connect('RULE-C');
    const heard = mem.heard.length;
    const sent = { firmware: 'v1.4.0', ip: 'fe80::1', uptime_s: 1.5, rssi: -61.4, temp_c: 40 };
    expect(await acknowledged(device.publishAsync(topics.heartbeat('RULE-C'), JSON.stringify(sent), { qos: 1 }))).toBe(
      'puback',
    );
    expect(news(heard)).toEqual([
      'heartbeat RULE-C {"ip":"fe80::1","rssi":-61}',
      'field RULE-C firmware invalid_format',
      'field RULE-C uptime_s not_an_integer',
    ]);
    const fields = await metric('fleet_heartbeat_fields_refused_total');
    expect(fields['firmware/invalid_format']).toBeGreaterThanOrEqual(1);
    expect(fields['uptime_s/not_an_integer']).toBeGreaterThanOrEqual(1);
    expect(device.connected).toBe(true);
    await device.endAsync();
  });

  it('a heartbeat that is not a JSON object is dropped and counted; one too large to read still counts as heard', async () => {
    const device = await mem.connect('RULE-C');
    const heard = mem.heard.length;
    const topic = topics.heartbeat('RULE-C');
    await device.publishAsync(topic, 'not json', { qos: 1 });
    await device.publishAsync(topic, '[1,2,3]', { qos: 1 });
    await device.publishAsync(topic, JSON.stringify({ firmware: '1.0.0', pad: 'x'.repeat(4200) }), { qos: 1 });
    expect(news(heard)).toEqual([
      `refused RULE-C not_json ${topic}`,
      `refused RULE-C not_object ${topic}`,
      'heartbeat RULE-C',
      `refused RULE-C too_large ${topic}`,
    ]);
    const dropped = await metric('fleet_mqtt_messages_dropped_total');
    expect(dropped['heartbeat/not_json']).toBeGreaterThanOrEqual(1);
    expect(dropped['heartbeat/not_object']).toBeGreaterThanOrEqual(1);
    expect(dropped['heartbeat/too_large']).toBeGreaterThanOrEqual(1);
    expect(device.connected).toBe(true);
    await device.endAsync();
  });
});
