import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../helpers/test-database';
import { ServiceProcess } from '../helpers/service-process';
import { ApiClient } from '../helpers/api-client';
import { connectDevice, heartbeat } from '../helpers/mqtt';
import { uploadFirmware } from '../ota/ota-helpers';
import { topics } from '#protocol/topics';
import { HTTP_DRAIN_MS } from '#api/app';
import { ifStarted } from '../helpers/teardown';
import { createAccountWithCli } from '../helpers/operator-cli';

/**
 * SIGTERM as an orchestrator sends it (`npm start`'s entry point as a real process): an idle
 * service stops at once with exit code 0; a busy one, with a firmware download that a device
 * reads no further, drains for a bounded time and still exits 0 before the 15 s watchdog.
 */
describe('graceful shutdown on SIGTERM', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let apiKey: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    env = {
      DATA_DIR: db.dataDir,
      ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
      FLEET_SECRET: randomBytes(32).toString('hex'),
      LOG_LEVEL: 'info',
      // As deployed: vitest's NODE_ENV=test turned off the Apollo signal handler that made every
      // SIGTERM wait for the 15 s watchdog.
      NODE_ENV: 'production',
    };
    apiKey = (await createAccountWithCli(env, { name: 'Stop Co', quota: 10, budget: 100 })).api_key;
  }, 120_000);
  afterAll(async () => ifStarted(db)?.drop());

  it('an idle service stops in under 5 s with exit code 0', { timeout: 90_000 }, async () => {
    const node = new ServiceProcess(env);
    await node.start();
    const { code, ms } = await node.terminate();
    expect({ code, ms: ms < 5000 }, node.logs().slice(-2000)).toEqual({ code: 0, ms: true });
    expect(node.logs()).toContain('"msg":"stopped"');
  });

  it(
    'a firmware download that stalls is cut after the drain time, and the service still exits 0',
    { timeout: 120_000 },
    async () => {
      const node = new ServiceProcess({ ...env, PUBLIC_URL: 'http://127.0.0.1:0' });
      await node.start();
      const publicUrl = node.httpUrl;
      const api = new ApiClient(publicUrl, apiKey);
      expect((await api.post('/api/v1/models', { name: 'LX-S' })).status).toBe(201);
      await uploadFirmware({ api } as Parameters<typeof uploadFirmware>[0], {
        model: 'LX-S',
        version: '2.0.0',
        bytes: randomBytes(64 * 1024 * 1024),
        expectStatus: 201,
      });
      const claimed = await api.post('/api/v1/devices/claim', {
        serials: ['STOP-1'],
        model: 'LX-S',
        firmware: '2.0.0',
      });
      expect(claimed.status).toBe(201);
      const creds = { serial: 'STOP-1', ...claimed.body.devices[0].credentials } as {
        serial: string;
        username: string;
        password: string;
      };
      const device = await connectDevice(`mqtt://127.0.0.1:${node.mqttPort}`, creds);
      const command = new Promise<{ url: string }>((resolve) =>
        device.on(
          'message',
          (topic, payload) => topic === topics.ota('STOP-1') && resolve(JSON.parse(payload.toString())),
        ),
      );
      await device.subscribeAsync(topics.ota('STOP-1'), { qos: 1 });
      await device.publishAsync(topics.heartbeat('STOP-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      const link = new URL((await command).url);
      // The device reads the first bytes and no more: the response cannot finish.
      const download = await fetch(`${publicUrl}${link.pathname}${link.search}`);
      expect(download.status).toBe(200);
      const reader = download.body!.getReader();
      await reader.read();

      const { code, ms } = await node.terminate();
      device.end(true);
      expect(code, node.logs().slice(-2000)).toBe(0);
      expect(ms).toBeGreaterThanOrEqual(HTTP_DRAIN_MS - 500);
      expect(ms).toBeLessThan(HTTP_DRAIN_MS + 5000);
      expect(node.logs()).toContain('HTTP requests still running at shutdown');
      expect(node.logs()).toContain('"msg":"stopped"');
      await reader.cancel().catch(() => undefined);
    },
  );
});
