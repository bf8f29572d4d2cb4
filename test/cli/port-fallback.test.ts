import net from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import mqtt from 'mqtt';
import { describe, it, expect, afterAll } from 'vitest';
import { ServiceProcess } from '../helpers/service-process';
import { usingPostgres } from '../helpers/test-database';

/** A port held by a plain TCP server, as another broker holds 1883. */
async function holdPort(port = 0): Promise<{ port: number; release(): Promise<void> }> {
  const server = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The MQTT URL the banner gives devices. */
function bannerMqttUrl(logs: string): string {
  const url = /MQTT for devices: (mqtt:\/\/\S+)/.exec(logs)?.[1];
  if (!url) throw new Error(`no MQTT URL in the banner:\n${logs}`);
  return url;
}

/** Our broker answers there: a CONNECT with an unknown device is refused by an MQTT CONNACK. */
async function expectOurBroker(url: string): Promise<void> {
  await expect(
    mqtt.connectAsync(url, {
      clientId: 'NOPE-1',
      username: 'NOPE-1',
      password: 'x',
      reconnectPeriod: 0,
      connectTimeout: 5000,
    }),
  ).rejects.toThrow(/Bad username or password|Not authorized/);
}

/**
 * Issue 27 item 1: `npm start` with no configuration where the default MQTT port is taken
 * moves MQTT to a free port, says so loudly, and keeps that port on the next start. The test
 * never assumes 1883: FLEET_DEFAULT_MQTT_PORT makes a port it holds play the default one.
 */
// Starts the embedded default whatever TEST_DATABASE_URL says: runs in the embedded run of the suite only.
describe.skipIf(usingPostgres())('zero-configuration start with the default MQTT port taken', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it(
    'listens on a free port, remembers it in the data folder, reuses it, and picks a new one when it is taken too',
    { timeout: 180_000 },
    async () => {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'fleet-port-fallback-'));
      dirs.push(dataDir);
      const other = await holdPort();
      // Empty = unset: nothing that makes this start "configured".
      const env = {
        DATA_DIR: dataDir,
        FLEET_DEFAULT_MQTT_PORT: String(other.port),
        MQTT_PORT: '',
        DATABASE_URL: '',
        TLS_CERT_FILE: '',
        TLS_KEY_FILE: '',
        REDIS_URL: '',
      };
      const file = path.join(dataDir, 'ports.json');

      const first = new ServiceProcess(env);
      await first.start();
      const url = bannerMqttUrl(first.logs());
      const port = Number(new URL(url).port);
      expect(port).not.toBe(other.port);
      expect(first.logs()).toContain(
        `!! MQTT: port ${other.port} was taken (another broker?), listening on ${url} instead.`,
      );
      expect(first.logs()).toContain(`!! Remembered in ${file}: the next start uses port ${port} again.`);
      expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ mqtt: port });
      await expectOurBroker(url);
      await first.stop();

      // The next start keeps it: every command edited for it still works.
      const second = new ServiceProcess(env);
      await second.start();
      expect(bannerMqttUrl(second.logs())).toBe(url);
      expect(second.logs()).toContain(`!! MQTT: on port ${port}, remembered in ${file}`);
      await second.stop();

      // The remembered port taken too: a new one, said so and remembered.
      const another = await holdPort(port);
      const third = new ServiceProcess(env);
      await third.start();
      const moved = bannerMqttUrl(third.logs());
      const movedPort = Number(new URL(moved).port);
      expect([other.port, port]).not.toContain(movedPort);
      expect(third.logs()).toContain(
        `!! MQTT: the remembered port ${port} and port ${other.port} were both taken, listening on ${moved} instead.`,
      );
      expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ mqtt: movedPort });
      await expectOurBroker(moved);
      await third.stop();
      await another.release();

      // A configured start never moves: MQTT_PORT names the taken port, the start fails loudly.
      const configured = new ServiceProcess({ ...env, MQTT_PORT: String(other.port) });
      await expect(configured.start(60_000)).rejects.toThrow(
        `MQTT port ${other.port} on 127.0.0.1 is already in use. Set MQTT_PORT to a free port (0 picks any).`,
      );
      await other.release();
    },
  );
});
