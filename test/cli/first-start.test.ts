import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it, expect, afterAll } from 'vitest';
import { ServiceProcess } from '../helpers/service-process';
import { freePort } from '../helpers/haproxy';
import { ApiClient } from '../helpers/api-client';
import { usingPostgres } from '../helpers/test-database';

/**
 * `npm start` on a fresh machine as a newcomer meets it: the first start fails on a taken MQTT
 * port; the next one must still print a way into the demo account, and a demo account whose key
 * was never used keeps saying how to get one.
 */
// Starts the embedded default whatever TEST_DATABASE_URL says: runs in the embedded run of the suite only.
describe.skipIf(usingPostgres())('first start of the embedded default', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it(
    'creates the demo account only once the ports are bound, and says how to get a key while it is unused',
    { timeout: 180_000 },
    async () => {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'fleet-first-start-'));
      dirs.push(dataDir);
      const taken = net.createServer();
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      const takenPort = (taken.address() as net.AddressInfo).port;

      const env = { DATA_DIR: dataDir, DEMO_ACCOUNT: 'true', LOG_LEVEL: 'warn' };
      const blocked = new ServiceProcess(env);
      blocked.mqttPort = takenPort;
      await expect(blocked.start(60_000)).rejects.toThrow(
        /MQTT port \d+ on 127\.0\.0\.1 is already in use\. Set MQTT_PORT/,
      );
      await new Promise<void>((resolve) => taken.close(() => resolve()));

      const first = new ServiceProcess(env);
      first.mqttPort = await freePort();
      await first.start();
      expect(first.logs()).toContain('Demo account created');
      const apiKey = /admin API key \(shown once\): (flk_\S+)/.exec(first.logs())?.[1];
      expect(apiKey).toBeDefined();
      await first.stop();

      // Restarted before anyone used the key: the login and the way to a new key are printed.
      const second = new ServiceProcess(env);
      await second.start();
      expect(second.logs()).toContain('portal login: demo@fleet.local / demo-password');
      expect(second.logs()).toMatch(
        new RegExp(`DATA_DIR=${dataDir} npx fleet api-key create --account [0-9a-f-]{36} --name demo --role admin`),
      );
      expect(second.logs()).not.toContain('flk_');
      expect((await new ApiClient(second.httpUrl, apiKey).get('/api/v1/allocation')).status).toBe(200);
      await second.stop();

      // Once the key has been used, the demo account is the user's own: nothing is printed.
      const third = new ServiceProcess(env);
      await third.start();
      expect(third.logs()).not.toContain('Demo account');
      await third.stop();
    },
  );
});
