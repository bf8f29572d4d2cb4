import { afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { SimulatedDevice } from '#simulator/simulated-device';

/**
 * A broker that accepts every CONNECT and acknowledges nothing else, so the device's QoS 1
 * heartbeat stays unacknowledged; `cut()` drops every connection without a DISCONNECT, as a
 * service restart does.
 */
async function silentBroker() {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.once('data', (chunk) => {
      // CONNECT is packet type 1: answer CONNACK "accepted", then stay silent.
      if (chunk[0] !== undefined && chunk[0] >> 4 === 1) socket.write(Buffer.from([0x20, 0x02, 0x00, 0x00]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`,
    cut: () => sockets.forEach((s) => s.destroy()),
    close: () =>
      new Promise<void>((resolve) => {
        sockets.forEach((s) => s.destroy());
        server.close(() => resolve());
      }),
  };
}

describe('simulated device stop', () => {
  let broker: Awaited<ReturnType<typeof silentBroker>> | undefined;
  afterEach(async () => broker?.close());

  it('stops at once when its connection is gone with a publish still unacknowledged', async () => {
    broker = await silentBroker();
    const device = new SimulatedDevice({
      credentials: { serial: 'STOP-1', username: 'STOP-1', password: 'x' },
      brokerUrl: broker.url,
      firmware: '1.0.0',
      heartbeatS: 60,
      random: () => 0.99,
    });
    await device.start();
    expect(device.connected).toBe(true);
    // The first heartbeat (QoS 1) went out with the CONNACK and is never acknowledged.
    broker.cut();
    await expect.poll(() => device.connected, { timeout: 5000 }).toBe(false);
    // Before its reconnect (1 to 5 s later) the device is stopped: mqtt.js's graceful end would
    // wait for that PUBACK for ever (a test's teardown hung 60 s after a service restart).
    const stopped = await Promise.race([
      device.stop().then(() => 'stopped'),
      new Promise((r) => setTimeout(() => r('still waiting'), 3000)),
    ]);
    expect(stopped).toBe('stopped');
  });

  it('stops within a bounded time when the broker never acknowledges its last publish', async () => {
    broker = await silentBroker();
    const device = new SimulatedDevice({
      credentials: { serial: 'STOP-2', username: 'STOP-2', password: 'x' },
      brokerUrl: broker.url,
      firmware: '1.0.0',
      heartbeatS: 60,
      random: () => 0.99,
    });
    await device.start();
    const started = Date.now();
    const stopped = await Promise.race([
      device.stop().then(() => 'stopped'),
      new Promise((r) => setTimeout(() => r('still waiting'), 5000)),
    ]);
    expect(stopped).toBe('stopped');
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
