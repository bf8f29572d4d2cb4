import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { PacketLoad } from '#bench/lib/packet-load';

/** Mosquitto on 127.0.0.1:1883, as on every machine here and in CI; skipped (and said so) where absent. */
const mosquitto = await new Promise<boolean>((resolve) => {
  const socket = net.connect({ host: '127.0.0.1', port: 1883 });
  socket.once('connect', () => {
    socket.destroy();
    resolve(true);
  });
  socket.once('error', () => resolve(false));
});
if (!mosquitto) console.log('packet-load generator test skipped: no Mosquitto on 127.0.0.1:1883');

/**
 * The benchmarks' lean generator (bench/lib/packet-load.ts) speaks MQTT a real broker accepts:
 * every QoS 1 publish it sends is acknowledged and timed, at the pace asked for.
 */
describe.skipIf(!mosquitto)('packet-load generator against Mosquitto', () => {
  const load = new PacketLoad();
  afterAll(() => load.close());

  it('connects, publishes QoS 1 at the offered rate and counts every PUBACK', { timeout: 30_000 }, async () => {
    const devices = Array.from({ length: 20 }, (_, i) => ({ serial: `PKTLOAD-${process.pid}-${i}` }));
    const connected = await load.connect({ host: '127.0.0.1', port: 1883, devices, clean: true });
    expect(connected).toMatchObject({ connected: 20, failed: 0 });
    const phase = await load.run({
      rate: 400,
      seconds: 1,
      topic: (serial) => `bench/${serial}/heartbeat`,
      payload: (serial, n) => Buffer.from(JSON.stringify({ serial, n })),
    });
    expect(phase.sent).toBe(400);
    expect(phase.acked).toBe(400);
    expect(phase.p99Ms).toBeLessThan(Infinity);
    expect(phase.p50Ms).toBeLessThanOrEqual(phase.p99Ms);
    expect(phase.seconds).toBeGreaterThan(0.9); // paced over the second, not sent at once
    expect(phase.sample.length).toBe(400);
  });

  it(
    'subscribes a new session as a device does and counts it connected on its SUBACK',
    { timeout: 30_000 },
    async () => {
      const devices = Array.from({ length: 5 }, (_, i) => ({ serial: `PKTSUB-${process.pid}-${i}` }));
      const subscriber = new PacketLoad();
      const subscribe = ['bench/{serial}/ota', 'bench/{serial}/config'];
      try {
        // Counted on the SUBACK: a SUBSCRIBE Mosquitto could not read would have dropped the connection.
        const first = await subscriber.connect({ host: '127.0.0.1', port: 1883, devices, clean: true, subscribe });
        expect(first).toMatchObject({ connected: 5, failed: 0 });
      } finally {
        subscriber.close();
      }
      // A subscription the broker refuses (Mosquitto drops a connection whose filter has a wildcard
      // inside a level): failed, not counted at its CONNACK.
      const refused = new PacketLoad();
      const result = await refused.connect({
        host: '127.0.0.1',
        port: 1883,
        devices: [{ serial: `PKTSUB-${process.pid}-x` }],
        clean: true,
        subscribe: ['bench/{serial}/a#b'],
      });
      expect(result).toMatchObject({ connected: 0, failed: 1 });
      refused.close();
    },
  );

  it('counts a broker that refuses the connection as failed', { timeout: 30_000 }, async () => {
    const refused = new PacketLoad();
    // A clientId Mosquitto refuses: MQTT 3.1.1 forbids an empty one with clean=false.
    const result = await refused.connect({ host: '127.0.0.1', port: 1883, devices: [{ serial: '' }], clean: false });
    expect(result).toMatchObject({ connected: 0, failed: 1 });
    refused.close();
  });
});
