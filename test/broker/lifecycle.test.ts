import { describe, it, expect, afterAll } from 'vitest';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { startTestServer, type TestServer } from '../helpers/test-server';

/** The broker inside the service's life cycle: readiness, a taken port, metrics. */
describe('broker life cycle', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it('reports the broker in /readyz and the device gauges in /metrics', async () => {
    const server = await startTestServer();
    servers.push(server);
    const ready = await fetch(`${server.service.httpUrl}/readyz`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { checks: Record<string, { ok: boolean; detail?: string }> };
    expect(body.checks.broker).toMatchObject({ ok: true });
    expect(body.checks.broker!.detail).toMatch(/0 devices connected/);
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    expect(metrics).toContain('fleet_mqtt_connected_devices 0');
    expect(metrics).toContain('fleet_heartbeat_flush_duration_seconds');
  });

  it('stops while a device is still connecting (a socket that never sent CONNECT does not hold the shutdown)', async () => {
    const server = await startTestServer();
    // A device reconnecting at the moment of a restart: TCP is up, MQTT CONNECT not (yet) seen.
    const socket = net.connect(server.service.mqttPort!, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // Before, the listener's close waited for this socket for as long as the client kept it open.
    await server.close();
    await closed;
    expect(socket.destroyed).toBe(true);
    // The start of the embedded database takes most of this; a held shutdown never ends at all.
  }, 60_000);

  it('refuses to start with a clear message when the MQTT port is taken', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as AddressInfo).port;
    try {
      await expect(startTestServer({ env: { MQTT_PORT: String(port) } })).rejects.toThrow(
        `MQTT port ${port} on 127.0.0.1 is already in use. Set MQTT_PORT to a free port (0 picks any).`,
      );
    } finally {
      blocker.close();
    }
  });
}, 180_000);
