import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { topics } from '#protocol/topics';
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
    mem = await startMemoryBroker({ [a]: 'secret-a', [b]: 'secret-b', 'RULE-C': 'secret-c' });
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

  it.each([
    ['another device’s heartbeat', () => topics.heartbeat(b)],
    ['another device’s status', () => topics.status(b)],
    ['its own ota (service to device only)', () => topics.ota(a)],
    ['its own config (service to device only)', () => topics.config(a)],
    ['a topic outside the protocol', () => `devices/${a}/other`],
    ['a foreign root', () => 'lights/all/on'],
  ])('publishing to %s is refused and disconnects the device', async (_label, topicOf) => {
    const device = await mem.connect(a);
    device.publish(topicOf(), heartbeat(), { qos: 1 });
    expect(await closed(device)).toBe(true);
    device.end(true);
  });

  it('hands a valid heartbeat to the domain, and counts a malformed one as dropped without disconnecting', async () => {
    const device = await mem.connect('RULE-C');
    await device.publishAsync(topics.heartbeat('RULE-C'), heartbeat(), { qos: 1 });
    await device.publishAsync(topics.heartbeat('RULE-C'), '{"firmware": 12}', { qos: 1 });
    await device.publishAsync(topics.heartbeat('RULE-C'), 'not json', { qos: 1 });
    expect(mem.heard.filter((h) => h === 'heartbeat RULE-C')).toHaveLength(1);
    const dropped = await counter('fleet_mqtt_messages_dropped_total');
    expect(
      dropped
        .filter((v) => v.labels.kind === 'heartbeat')
        .map((v) => `${v.labels.reason}:${v.value}`)
        .sort(),
    ).toEqual(['invalid:1', 'not_json:1']);
    expect(device.connected).toBe(true);
    await device.endAsync();
  });
});
