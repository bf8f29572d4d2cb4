import { describe, it, expect, afterEach } from 'vitest';
import type { MqttClient } from 'mqtt';
import { KEEPALIVE_MAX_S, KEEPALIVE_MIN_S } from '#protocol/payloads';
import { servedKeepalive } from '#broker/keepalive';
import { startMemoryBroker, type MemoryBroker } from '../helpers/memory-broker';
import { ifStarted } from '../helpers/teardown';

/**
 * Keepalive 0 turns MQTT's dead-connection check off, and a huge one all but does: the broker
 * serves both as its maximum, so a connection that went silent is always closed (and the device
 * marked offline). Shown with a maximum of 1 s so the test waits 1.5 s, not 30 minutes.
 */
describe('keepalive: the broker always detects a dead connection', () => {
  let mem: MemoryBroker | undefined;
  afterEach(async () => {
    await ifStarted(mem)?.close();
    mem = undefined;
  });

  /** Resolves with the ms until the broker closed the connection, or null when it had not after `ms`. */
  const closedWithin = (client: MqttClient, ms: number) =>
    new Promise<number | null>((resolve) => {
      const started = Date.now();
      const timer = setTimeout(() => resolve(null), ms);
      client.once('close', () => {
        clearTimeout(timer);
        resolve(Date.now() - started);
      });
    });
  const outside = async () =>
    Object.fromEntries(
      (
        (await mem!.metrics.registry.getSingleMetric('fleet_mqtt_keepalive_outside_range_total')?.get())?.values ?? []
      ).map((v) => [v.labels.reason, v.value]),
    );

  it.each([
    ['0 (no keepalive)', 0, 'zero'],
    ['65535 s (above the maximum)', 65_535, 'above_max'],
  ])('a silent client that asked keepalive %s is closed after 1.5 x the maximum', async (_label, keepalive, reason) => {
    mem = await startMemoryBroker({ 'KA-1': 'secret' }, { keepaliveMaxS: 1 });
    // mqtt.js sends no PINGREQ with keepalive 0, and none within the test with 65535: it stays silent.
    const device = await mem.connect('KA-1', { keepalive });
    const after = await closedWithin(device, 4000);
    expect(after, 'the broker never closed the silent connection').not.toBeNull();
    expect(after!).toBeLessThan(2500);
    expect(mem.heard).toContain('offline KA-1 keepalive_timeout');
    expect(await outside()).toEqual({ [reason]: 1 });
  });

  it('keeps a client that pings within the keepalive it asked', async () => {
    mem = await startMemoryBroker({ 'KA-2': 'secret' }, { keepaliveMaxS: 1 });
    const device = await mem.connect('KA-2', { keepalive: 1 });
    expect(await closedWithin(device, 2500)).toBeNull();
    expect(await outside()).toEqual({ below_min: 1 });
  });

  it.each([
    [0, KEEPALIVE_MAX_S, 'zero'],
    [1, 1, 'below_min'],
    [KEEPALIVE_MIN_S - 1, KEEPALIVE_MIN_S - 1, 'below_min'],
    [KEEPALIVE_MIN_S, KEEPALIVE_MIN_S, null],
    [30, 30, null],
    [300, 300, null],
    [KEEPALIVE_MAX_S, KEEPALIVE_MAX_S, null],
    [KEEPALIVE_MAX_S + 1, KEEPALIVE_MAX_S, 'above_max'],
    [65_535, KEEPALIVE_MAX_S, 'above_max'],
  ])('keepalive %i is served as %i (outside the range: %s)', (requested, seconds, reason) => {
    expect(servedKeepalive(requested)).toEqual({ seconds, outside: reason });
  });

  it('has the documented range', () => {
    expect([KEEPALIVE_MIN_S, KEEPALIVE_MAX_S]).toEqual([10, 1200]);
  });
});
