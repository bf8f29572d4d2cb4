import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, serials, setReported } from '../helpers/factories';
import { claimWithCredentials, connectHeard, deployment, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { ManualClock } from '#core/shared/clock';
import { usingPostgres } from '../helpers/test-database';

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
  const connect = async (c: { serial: string; username: string; password: string }) =>
    (await connectHeard(server.service.mqttUrl!, a, c, clients)).commands;

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

/**
 * The sweep after a dispatch that left nothing waiting: the deployment's other devices are
 * offline, and each dispatches its own update when it is heard, so the sweep looks at such a
 * quiet deployment again only after a minute (a backup for a heard device whose dispatch was
 * lost), while one with an update waiting on an online device (held, outside its window) is
 * looked at every sweep. Devices are put online here as a heartbeat would have left them, without
 * the dispatch a heartbeat makes: only the sweep can send to them.
 */
describe('the sweep of a quiet deployment', { timeout: 120_000 }, () => {
  const clock = new ManualClock('2026-03-10T10:00:00Z');
  let server: TestServer;
  let a: TestAccount;

  beforeAll(async () => {
    server = await startTestServer({ clock, env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '3600' } });
    a = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    for (const model of ['LX-200', 'LX-300']) {
      await buildModel(a, model);
      await uploadFirmware(a, { model, version: '2.0.0', bytes: Buffer.alloc(2000, 2), expectStatus: 201 });
    }
  }, 60_000);
  afterAll(async () => ifStarted(server)?.close());

  const ota = () => server.service.services.ota;
  const knex = () => server.service.database.knex;
  const stateOf = async (serial: string) =>
    (
      await knex()('device_updates as u')
        .join('devices as d', 'd.id', 'u.device_id')
        .where('d.serial', serial)
        .first('u.state')
    ).state as string;
  const deploy = async (model: string, more: Record<string, unknown> = {}) => {
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', filter: { model }, ...more });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    await ota().idle();
    return res.body.deployment_id as string;
  };
  const online = (serial: string) =>
    setReported(knex(), {
      accountId: a.accountId,
      serials: [serial],
      state: { firmware: '1.0.0', status: 'online', lastSeen: clock.now() },
    });

  /** Time passes and the device shows online again, without its own dispatch: the sweep, then its update's state. */
  const sweepAfter = async (ms: number, serial: string) => {
    clock.advance(ms);
    await online(serial);
    await ota().runNow();
    return stateOf(serial);
  };

  it('looks again after a minute, not at every sweep', async () => {
    await claimWithCredentials(a, { serials: serials('QUIET', 3), model: 'LX-200' });
    await deploy('LX-200');
    await online('QUIET-0001');
    await ota().runNow();
    expect(await sweepAfter(30_000, 'QUIET-0001')).toBe('queued');
    expect(await sweepAfter(31_000, 'QUIET-0001')).toBe('sent');
    expect(await stateOf('QUIET-0002')).toBe('queued');
    // That sweep neither locked nor read the offline devices' rows (a lock stays in xmax).
    const locked = await knex().raw<{ rows: Array<{ n: number }> }>(
      `SELECT count(*)::int AS n FROM device_updates u JOIN devices d ON d.id = u.device_id
        WHERE d.serial IN ('QUIET-0002', 'QUIET-0003') AND u.xmax::text <> '0'`,
    );
    expect(locked.rows[0]!.n).toBe(0);
  });

  it('looks at every sweep while an update waits on an online device, and sends it when its hold ends', async () => {
    await claimWithCredentials(a, { serials: ['HELD-1', 'HELD-2'], model: 'LX-300' });
    await online('HELD-1');
    const device = await knex()('devices').where({ serial: 'HELD-1' }).first('id');
    await knex()('device_update_locks').insert({
      device_id: device.id,
      account_id: a.accountId,
      until: new Date(clock.now().getTime() + 10_000),
      reason: 'occupied',
    });
    await deploy('LX-300');
    expect(await stateOf('HELD-1')).toBe('queued');
    // Put online without a dispatch, as above: a quiet deployment would not look at it for a minute.
    await online('HELD-2');
    clock.advance(11_000);
    await online('HELD-1');
    await online('HELD-2');
    await ota().runNow();
    expect(await stateOf('HELD-1')).toBe('sent');
    expect(await stateOf('HELD-2')).toBe('sent');
  });

  // The embedded database has one connection: a transaction held open would stop the service.
  it.runIf(usingPostgres())(
    "stays quiet when a paused deployment's device becomes ready during its dispatch",
    async () => {
      await claimWithCredentials(a, { serials: ['PAUSED-1'], model: 'LX-200' });
      await claimWithCredentials(a, { serials: ['TURN-1', 'TURN-2'], model: 'LX-200' });
      const paused = await deploy('LX-200', { serials: ['PAUSED-1'] });
      expect((await a.api.post(`/api/v1/firmware/deployments/${paused}/pause`)).status).toBe(200);
      // A tag limit makes the dispatch take its deployment's row lock, which the test holds.
      const running = await deploy('LX-200', {
        serials: ['TURN-1', 'TURN-2'],
        rollout: { max_concurrent_per_tag: { tag: 'zone', max: 5 } },
      });
      // Its deploy's dispatch made it quiet for a minute; that minute is over.
      clock.advance(61_000);
      const holder = await knex().transaction();
      try {
        await holder('deployments').where({ id: running }).forUpdate().first('id');
        // A dispatch of the whole deployment (as a resume makes), held at its turn.
        ota().deploymentChanged(running);
        await expect
          .poll(
            async () =>
              (
                await knex().raw<{ rows: unknown[] }>(
                  `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                    AND query LIKE 'select "id" from "deployments"%for update'`,
                )
              ).rows.length,
            { timeout: 10_000, interval: 20 },
          )
          .toBe(1);
        const device = await knex()('devices').where({ serial: 'PAUSED-1' }).first('id');
        await ota().onDeviceReady({ accountId: a.accountId, deviceId: device.id, serial: 'PAUSED-1' });
        await holder.commit();
        await ota().idle();
      } finally {
        if (!holder.isCompleted()) await holder.rollback();
      }
      // Quiet: a device put online without its own dispatch waits for the sweep a minute later.
      await online('TURN-1');
      expect(await sweepAfter(6_000, 'TURN-1')).toBe('queued');
      expect(await sweepAfter(60_000, 'TURN-1')).toBe('sent');
    },
  );

  it('completes at once when an unclaim removes the last queued update', async () => {
    await claimWithCredentials(a, { serials: ['GONE-1', 'KEPT-1'], model: 'LX-200' });
    const id = await deploy('LX-200', { serials: ['GONE-1', 'KEPT-1'] });
    const kept = await knex()('devices').where({ serial: 'KEPT-1' }).first('id');
    // KEPT-1 says it runs the target already; GONE-1 stays offline, its update queued.
    await ota().onFirmwareReported([
      { accountId: a.accountId, deviceId: kept.id, serial: 'KEPT-1', firmware: '2.0.0', previous: '1.0.0' },
    ]);
    await ota().idle();
    expect((await deployment(a, id)).status).toBe('running');
    expect((await a.api.delete('/api/v1/devices/GONE-1')).status).toBe(204);
    // No sweep runs here (OTA_SWEEP_INTERVAL_MS=0): the unclaim itself has the deployment judged.
    await ota().idle();
    expect((await deployment(a, id)).status).toBe('completed');
  });
});
