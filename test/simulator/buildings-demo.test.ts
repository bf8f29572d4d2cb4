import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { claimWithCredentials, deployment, startSimulated, uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';
import type { SimulatedDevice } from '#simulator/simulated-device';

/** HH:MM in a zone, `minutes` from now. */
function localTime(timeZone: string, minutes: number): string {
  const at = new Date(Date.now() + minutes * 60_000);
  return new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(
    at,
  );
}

/**
 * The buildings demo with the simulator's modules (docs/ota.md "Walkthrough: a building in
 * Tokyo"): a site in another time zone whose local maintenance window is open now, an emergency
 * fixture that has just run its duration test (held, 24 h), and a deploy to 2.0.0 that the other
 * fixtures, on 1.0.0, reach through the stepping stone 1.5.0, the first hop as a delta image.
 */
describe('buildings demo: a site in Tokyo, a held emergency fixture, a delta, a two-hop path', () => {
  let server: TestServer;
  let a: TestAccount;
  const sims: SimulatedDevice[] = [];
  const poll = { timeout: 60_000, interval: 200 };
  const v100 = randomBytes(120_000);
  // 1.5.0: a patch of 1.0.0 (a delta is a fraction of it); 2.0.0 installs only from 1.5.0 on.
  const v150 = Buffer.concat([v100.subarray(0, 60_000), Buffer.from('dim curve v2'), v100.subarray(60_000)]);
  const v200 = randomBytes(120_000);

  beforeAll(async () => {
    server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '250' } });
    a = await server.createAccount({ quota: 20, rateLimitPerMinute: 100_000 });
    await buildModel(a, 'LX-200');
    await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', bytes: v100, expectStatus: 201 });
    await uploadFirmware(a, { model: 'LX-200', version: '1.5.0', bytes: v150, expectStatus: 201 });
    await uploadFirmware(a, {
      model: 'LX-200',
      version: '2.0.0',
      bytes: v200,
      upgradeFrom: '>=1.5.0',
      expectStatus: 201,
    });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(sims.map((d) => d.stop()));
    await ifStarted(server)?.close();
  });

  it(
    'updates the building in its window, holds the emergency fixture, and takes the path with a delta',
    { timeout: 180_000 },
    async () => {
      // The site's window is open now in Tokyo's local time (an hour ago to two hours on).
      const site = await a.api.post('/api/v1/sites', {
        name: 'Tokyo Tower Office',
        time_zone: 'Asia/Tokyo',
        maintenance_window: { start: localTime('Asia/Tokyo', -60), end: localTime('Asia/Tokyo', 120) },
      });
      expect(site.status, JSON.stringify(site.body)).toBe(201);
      const fixtures = serials('TKY', 3);
      const creds = await claimWithCredentials(a, { serials: fixtures, model: 'LX-200', firmware: '1.0.0' });
      for (const serial of fixtures) {
        const moved = await a.api.patch(`/api/v1/devices/${serial}`, { site: 'Tokyo Tower Office' });
        expect(moved.status, JSON.stringify(moved.body)).toBe(200);
      }
      const emergency = fixtures[0]!;
      expect(
        (
          await a.api.request('PUT', `/api/v1/devices/${emergency}/emergency-lighting`, {
            body: { emergency_lighting: true },
          })
        ).status,
      ).toBe(200);
      const images = () => new Map<string, Uint8Array>([['1.0.0', v100]]);
      for (const c of creds) sims.push(...(await startSimulated(server, [c], { firmware: '1.0.0', images: images() })));
      await expect
        .poll(async () => (await a.api.get('/api/v1/devices?firmware=1.0.0&status=online')).body.total, poll)
        .toBe(3);
      // The emergency fixture has just finished its duration test: 24 h of recharge before anything else.
      await sims[0]!.lockUpdates({ for_s: 600, reason: 'emergency_test', duration_test_ended_s_ago: 0 });
      await expect
        .poll(async () => (await a.api.get(`/api/v1/devices/${emergency}/update-lock`)).body.lock?.reason, poll)
        .toBe('emergency_test');

      // A dry run of the stepping stone has its delta built ahead (docs/ota.md: hop deltas are built
      // when a hop's first command goes out, or ahead by a dry run of that version).
      await a.api.post('/api/v1/firmware/deploy', {
        firmware_version: '1.5.0',
        filter: { site: 'Tokyo Tower Office' },
        dry_run: true,
      });
      await server.service.services.deltas.idle();
      const request = { firmware_version: '2.0.0', filter: { site: 'Tokyo Tower Office' } };
      const dry = await a.api.post('/api/v1/firmware/deploy', { ...request, dry_run: true });
      expect(dry.status, JSON.stringify(dry.body)).toBe(200);
      expect(dry.body.upgrade_paths).toMatchObject({
        paths: [{ from_version: '1.0.0', hops: ['1.5.0', '2.0.0'], devices: 3 }],
        no_upgrade_path_count: 0,
      });
      expect(dry.body.held).toEqual({ count: 1, reasons: { emergency_test: 1 }, serials: [emergency] });
      const id = (await a.api.post('/api/v1/firmware/deploy', request)).body.deployment_id as string;
      await expect
        .poll(() => sims.slice(1).map((d) => d.firmware), { ...poll, timeout: 120_000 })
        .toEqual(['2.0.0', '2.0.0']);
      // The modules run 2.0.0 a moment before the service has their reports.
      await expect.poll(async () => (await deployment(a, id)).counts.succeeded, poll).toBe(2);
      const view = await deployment(a, id);
      expect(view.held).toEqual({ count: 1, reasons: { emergency_test: 1 }, serials: [emergency] });
      expect(sims[0]!.firmware).toBe('1.0.0');
      // The first hop went as a delta where it was ready in time: never more bytes than the images.
      expect(view.transfer.bytes_sent).toBeLessThanOrEqual(view.transfer.full_image_bytes);
      const deltas = await server.service.database.knex('firmware_deltas').where({ status: 'ready' });
      expect(deltas.length).toBeGreaterThanOrEqual(1);
    },
  );
});
