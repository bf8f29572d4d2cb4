import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomBytes } from 'node:crypto';
import mqtt, { type MqttClient } from 'mqtt';
import { createTestDatabase, type TestDatabase } from '../helpers/test-database';
import { ServiceProcess } from '../helpers/service-process';
import { ApiClient } from '../helpers/api-client';
import { serials } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';
import { createAccountWithCli } from '../helpers/operator-cli';
import { topics } from '#protocol/topics';

const DEVICES = 20;
/** PUBACKs seen before the kill: enough that it lands while readings are still in flight. */
const KILL_AFTER_ACKS = 300;

/**
 * kill -9 of the service while devices publish luminaire readings at QoS 1 (docs/luminaire-data.md
 * "Ingestion"): every reading the service acknowledged is in the series after the restart. The
 * PUBACK waits for the commit of the batch holding the reading, so the process cannot die
 * between acknowledging a reading and storing it.
 */
describe('luminaire readings across a kill -9', () => {
  let db: TestDatabase;
  let node: ServiceProcess;
  let api: ApiClient;
  const clients: MqttClient[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    const env = { DATA_DIR: db.dataDir, ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}) };
    const account = await createAccountWithCli(env, {
      name: 'Kill Lux',
      quota: 1000,
      budget: 100000,
      perMinute: 10000,
    });
    node = new ServiceProcess({ ...env, FLEET_SECRET: randomBytes(32).toString('hex') });
    await node.start();
    api = new ApiClient(node.httpUrl, account.api_key);
    const model = await api.post('/api/v1/models', { name: 'LX-K' });
    expect(model.status, JSON.stringify(model.body)).toBe(201);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) c.end(true);
    await ifStarted(node)?.stop();
    await ifStarted(db)?.drop();
  }, 60_000);

  it('loses no acknowledged reading', { timeout: 180_000 }, async () => {
    const claim = await api.post<{
      devices: Array<{ serial: string; credentials: { username: string; password: string } }>;
    }>('/api/v1/devices/claim', { serials: serials('LUXK', DEVICES), model: 'LX-K' });
    expect(claim.status).toBe(201);
    const acked = new Map<string, Set<string>>();
    let sent = 0;
    let enough: () => void = () => undefined;
    const killPoint = new Promise<void>((resolve) => (enough = resolve));
    let total = 0;
    let dead = false;
    const timers: NodeJS.Timeout[] = [];
    for (const d of claim.body.devices) {
      const client = mqtt.connect(`mqtt://127.0.0.1:${node.mqttPort}`, {
        clientId: d.serial,
        username: d.credentials.username,
        password: d.credentials.password,
        clean: true,
        reconnectPeriod: 0,
      });
      clients.push(client);
      await new Promise<void>((resolve, reject) => {
        client.once('connect', () => resolve());
        client.once('error', reject);
      });
      const mine = new Set<string>();
      acked.set(d.serial, mine);
      // 16 readings a second per device, under the protocol's per-device rate (20/s), readings 1 ms apart.
      const base = Date.now();
      let n = 0;
      const timer = setInterval(() => {
        if (dead) {
          clearInterval(timer);
          return;
        }
        const at = new Date(base + n++).toISOString();
        sent += 1;
        client.publish(
          topics.luminaire(d.serial),
          JSON.stringify({ at, energy_wh: n, power_w: 20 }),
          { qos: 1 },
          (err) => {
            if (err) return;
            mine.add(at);
            total += 1;
            if (total >= KILL_AFTER_ACKS) enough();
          },
        );
      }, 60);
      timers.push(timer);
    }
    await killPoint;
    await node.kill();
    dead = true;
    for (const t of timers) clearInterval(t);
    expect(sent - total, 'the kill came with no reading in flight').toBeGreaterThan(0);
    for (const c of clients) c.end(true);

    await node.start();
    for (const [serial, ats] of acked) {
      const res = await api.get<{ points: Array<{ at: string }> }>(
        `/api/v1/devices/${serial}/luminaire?resolution=raw&from=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`,
      );
      expect(res.status).toBe(200);
      const stored = new Set(res.body.points.map((p) => p.at));
      const lost = [...ats].filter((at) => !stored.has(at));
      expect(lost, `${serial}: acknowledged readings missing after the restart`).toEqual([]);
    }
  });
});
