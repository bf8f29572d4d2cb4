import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { collect, connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { claimWithCredentials, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';

/**
 * A running deployment whose devices are mostly offline (luminaires switched off at the wall
 * for the night): its dispatches and sweeps send to the online devices and leave the others'
 * queued updates alone, neither locked nor read, however often the sweep runs.
 */
describe('a deployment to offline devices', { timeout: 120_000 }, () => {
  let server: TestServer;
  let a: TestAccount;
  const clients: MqttClient[] = [];
  const poll = { timeout: 30_000, interval: 50 };

  beforeAll(async () => {
    server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '3600' } });
    a = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    await buildModel(a, 'LX-200');
    for (const v of ['1.0.0', '2.0.0'])
      await uploadFirmware(a, { model: 'LX-200', version: v, bytes: Buffer.alloc(2000, v), expectStatus: 201 });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  const ota = () => server.service.services.ota;
  const connect = async (c: { serial: string; username: string; password: string }) => {
    const client = await connectDevice(server.service.mqttUrl!, c);
    clients.push(client);
    const seen = collect(client);
    await client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
    await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await expect
      .poll(async () => (await a.api.get(`/api/v1/devices/${c.serial}`)).body.connectivity, poll)
      .toBe('online');
    return () => seen.filter((m) => m.topic === topics.ota(c.serial));
  };

  it("sends to the online devices and never locks the offline ones' queued updates", async () => {
    const creds = await claimWithCredentials(a, { serials: serials('NIGHT', 40), model: 'LX-200' });
    const first = await connect(creds[0]!);
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', filter: { model: 'LX-200' } });
    expect(res.status).toBe(202);
    const id = res.body.deployment_id as string;
    await ota().idle();
    await expect.poll(() => first().length, poll).toBe(1);
    for (let sweep = 0; sweep < 3; sweep++) await ota().runNow();

    // A row locked FOR UPDATE keeps its locker in xmax after the commit: none of the 39 was.
    const knex = server.service.database.knex;
    const queued = await knex.raw<{ rows: Array<{ n: number; locked: number }> }>(
      `SELECT count(*)::int AS n, (count(*) FILTER (WHERE xmax::text <> '0'))::int AS locked
         FROM device_updates WHERE deployment_id = ? AND state = 'queued'`,
      [id],
    );
    expect(queued.rows[0]).toEqual({ n: 39, locked: 0 });

    // A device that comes online later gets its command when it is heard, as before.
    const late = await connect(creds[1]!);
    await expect.poll(() => late().length, poll).toBe(1);
    expect(first()).toHaveLength(1);
  });
});
