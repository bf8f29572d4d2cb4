import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { Fleet, claimDevices, makeSerials } from '#simulator/fleet';
import { failingDriverSerials } from '#simulator/luminaire-faults';
import { scaledReconnectPolicy } from '#simulator/reconnect-backoff';

/** HH:MM in UTC, `minutes` from now. */
const utcTime = (minutes: number): string => new Date(Date.now() + minutes * 60_000).toISOString().slice(11, 16);

/**
 * The fixture health demo (docs/fixture-health.md "Demo"), on the real service with simulated
 * luminaires: `--failing-drivers` puts a failing fixture on the maintenance list, and a deploy
 * of the `--bad-firmware` version is paused by the health gate with its evidence. The canary
 * and the control are two streets: the first one's maintenance window is open now, the
 * second's opens in three hours, so its fixtures wait on the old version meanwhile. Readings
 * every half second stand in for every 15 minutes; the gate's minimum exposure is set to its
 * smallest (1 device-day: 30 fixtures for an hour each), and its statistics are unchanged.
 * About 25 s alone; the limit leaves room for a loaded machine.
 */
describe('fixture health demo: a maintenance alert and a rollout paused by the health gate', () => {
  let server: TestServer;
  let account: TestAccount;
  let fleet: Fleet | undefined;
  const serials = makeSerials('DEMO', 60);
  const canary = serials.slice(0, 30);

  beforeAll(async () => {
    server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '250' } });
    account = await server.createAccount({ quota: 100, rateLimitPerMinute: 100_000 });
    await buildModel(account, 'LX-200');
    for (const version of ['1.0.0', '2.0.0'])
      await uploadFirmware(account, { model: 'LX-200', version, expectStatus: 201 });
  }, 120_000);
  afterAll(async () => {
    await fleet?.stop();
    await ifStarted(server)?.close();
  });

  it('lists the failing fixture for maintenance and pauses the bad firmware with the evidence recorded', async () => {
    for (const [name, window] of [
      ['Canary Street', { start: utcTime(-60), end: utcTime(120) }],
      ['Control Street', { start: utcTime(180), end: utcTime(240) }],
    ] as const) {
      const site = await account.api.post('/api/v1/sites', { name, time_zone: 'UTC', maintenance_window: window });
      expect(site.status, JSON.stringify(site.body)).toBe(201);
    }
    const devices = await claimDevices({
      apiUrl: server.service.httpUrl,
      apiKey: account.apiKey,
      model: 'LX-200',
      firmware: '1.0.0',
      serials,
    });
    for (const serial of serials) {
      const site = canary.includes(serial) ? 'Canary Street' : 'Control Street';
      const moved = await account.api.patch(`/api/v1/devices/${serial}`, { site });
      expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    }
    const failing = failingDriverSerials(serials, 0.02);
    fleet = new Fleet({
      devices,
      brokerUrl: server.service.mqttUrl!,
      firmware: '1.0.0',
      heartbeatS: 2,
      rebootMs: 200,
      reconnect: scaledReconnectPolicy(0.25),
      luminaire: 0.5,
      failingDrivers: 0.02,
      luminaireFaults: { badFirmware: '2.0.0', failingDriverReadings: 9 },
    });
    expect((await fleet.start()).connected).toBe(60);
    const acked = (serial: string) => fleet!.devices.find((d) => d.serial === serial)!.luminaire!.acked;
    await expect
      .poll(() => Math.min(...serials.map(acked)), { timeout: 20_000, interval: 200 })
      .toBeGreaterThanOrEqual(4);

    const deploy = await account.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200' },
      rollout: { fixture_signals: ['thermal_derating', 'supply_faults'], fixture_min_device_days: 1 },
    });
    expect(deploy.status, JSON.stringify(deploy.body)).toBe(202);
    const id = deploy.body.deployment_id as string;

    // The canary street installs it; the control street waits for its window.
    await expect
      .poll(async () => (await account.api.get('/api/v1/devices?firmware=2.0.0')).body.total, {
        timeout: 30_000,
        interval: 250,
      })
      .toBe(30);
    const onNew = new Map(canary.map((s) => [s, acked(s)]));
    await expect
      .poll(() => Math.min(...canary.map((s) => acked(s) - onNew.get(s)!)), { timeout: 20_000, interval: 200 })
      .toBeGreaterThanOrEqual(10);

    // The health pass (every 5 minutes in service) runs now.
    await server.service.healthWorker.runNow();

    const maintenance = await account.api.get('/api/v1/maintenance');
    expect(maintenance.status).toBe(200);
    const items = maintenance.body.items as Array<{ serial: string; state: string; reasons: Array<{ text: string }> }>;
    const alert = items.find((i) => failing.has(i.serial));
    expect(alert).toBeDefined();
    expect(alert!.state).toBe('failed');
    expect(alert!.reasons[0]!.text).toMatch(/^Light source failed \d+ times? in the last 7 days$/);

    const detail = await account.api.get(`/api/v1/firmware/deployments/${id}`);
    expect(detail.body.deployment).toMatchObject({ status: 'paused', paused_reason: 'fixture_health' });
    const gate = await account.api.get(`/api/v1/deployments/${id}/fixture-gate`);
    expect(gate.status).toBe(200);
    expect(gate.body.recorded.paused_at).toEqual(expect.any(String));
    const decision = gate.body.recorded.decision;
    expect(decision).toMatchObject({ state: 'pause', compared_with: 'control', updated: { devices: 30 } });
    const worse = (decision.signals as Array<{ signal: string; verdict: string; ratio_lower_bound: number }>).filter(
      (s) => s.verdict === 'worse',
    );
    expect(worse.map((s) => s.signal)).toContain('thermal_derating');
    for (const s of worse) expect(s.ratio_lower_bound).toBeGreaterThan(2);
    expect(decision.summary).toMatch(/per 1,000 device-days updated against .* for not-yet-updated devices/);
  }, 90_000);
});
