import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';
import { Fleet, claimDevices, makeSerials } from '#simulator/fleet';
import { LuminaireFaults, failingDriverSerials } from '#simulator/luminaire-faults';
import { LuminaireModel } from '#simulator/luminaire-model';
import { LuminaireReading } from '#protocol/luminaire-fields';
import { scaledReconnectPolicy } from '#simulator/reconnect-backoff';

/** A seeded random source, so the simulated luminaires are the same on every run. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
}

/** `--failing-drivers` and `--bad-firmware` (simulator/src/luminaire-faults.ts, README "Devices and the simulator"). */
describe('simulator: failing drivers and bad firmware', () => {
  it('picks the same share of serials every run, at least one when the share is above zero', () => {
    const serials = makeSerials('FD', 200);
    const picked = failingDriverSerials(serials, 0.02);
    expect(picked.size).toBe(4);
    expect(failingDriverSerials([...serials].reverse(), 0.02)).toEqual(picked);
    expect(failingDriverSerials(makeSerials('FD', 10), 0.02).size).toBe(1);
    expect(failingDriverSerials(serials, 0).size).toBe(0);
  });

  it('a failing driver derates more and more, then has supply faults and shutdowns, then its light source fails', () => {
    const random = seeded(7);
    const faults = new LuminaireFaults({ failingDriver: true, failingDriverReadings: 12 }, random);
    const model = new LuminaireModel({ random, driverReplacementPerDay: 0, sourceFailed: () => faults.sourceFailed() });
    const start = Date.parse('2026-11-27T19:00:00Z');
    const readings = Array.from({ length: 16 }, (_, i) =>
      faults.apply(model.read(new Date(start + i * 900_000)), '1.0.0'),
    );
    for (const r of readings) expect(LuminaireReading.strict().safeParse(r).success).toBe(true);
    const at = (i: number) => readings[i]!;
    // Each stage is a third of the 12 readings: 0-3, 4-7, 8-11, then the failure.
    expect(at(2).gear_thermal_derating).toBeGreaterThan(0);
    expect(at(2).supply_undervoltage).toBe(0);
    expect(at(10).gear_thermal_derating! - at(7).gear_thermal_derating!).toBeGreaterThan(
      at(3).gear_thermal_derating! - at(0).gear_thermal_derating!,
    );
    expect(at(6).supply_undervoltage).toBeGreaterThan(0);
    expect(at(10).gear_thermal_shutdown).toBeGreaterThan(0);
    expect(at(10).source_failures).toBe(0);
    expect(at(11).source_failures).toBe(1);
    // Dark from then on, at 19:00-23:00 UTC when a healthy one is at full output.
    expect(at(13)).toMatchObject({ output_level_pct: 0, source_failures: 1 });
    expect(at(15).gear_thermal_derating).toBe(at(11).gear_thermal_derating);
  });

  it('bad firmware raises the fault rate of the devices running it, and only of them', () => {
    const faults = new LuminaireFaults({ badFirmware: '2.0.0' }, seeded(9));
    const model = new LuminaireModel({ random: seeded(10), driverReplacementPerDay: 0 });
    const start = Date.parse('2026-11-27T12:00:00Z');
    const read = (i: number, fw: string) => faults.apply(model.read(new Date(start + i * 60_000)), fw);
    const before = read(0, '1.0.0');
    const old = read(100, '1.0.0');
    expect(old.gear_thermal_derating! + old.supply_undervoltage!).toBe(
      before.gear_thermal_derating! + before.supply_undervoltage!,
    );
    let last = old;
    for (let i = 101; i <= 200; i++) last = read(i, '2.0.0');
    expect(last.gear_thermal_derating! - old.gear_thermal_derating!).toBeGreaterThan(30);
    expect(last.supply_undervoltage! + last.supply_overvoltage! - old.supply_undervoltage!).toBeGreaterThan(20);
  });

  describe('against a real server', () => {
    let server: TestServer;
    let account: TestAccount;
    let fleet: Fleet | undefined;

    beforeAll(async () => {
      server = await startTestServer();
      account = await server.createAccount();
      await buildModel(account, 'Luma-100');
    }, 180_000);
    afterAll(async () => {
      await fleet?.stop();
      await ifStarted(server)?.close();
    });

    it('a fleet with a failing driver puts that device, and no healthy one, on the maintenance list', async () => {
      const serials = makeSerials('FAIL', 6);
      const devices = await claimDevices({
        apiUrl: server.service.httpUrl,
        apiKey: account.apiKey,
        model: 'Luma-100',
        firmware: '1.0.0',
        serials,
      });
      const failing = failingDriverSerials(serials, 0.1);
      expect(failing.size).toBe(1);
      fleet = new Fleet({
        devices,
        brokerUrl: server.service.mqttUrl!,
        firmware: '1.0.0',
        heartbeatS: 1,
        reconnect: scaledReconnectPolicy(0.25),
        luminaire: 0.2,
        failingDrivers: 0.1,
        luminaireFaults: { failingDriverReadings: 9 },
      });
      expect((await fleet.start()).connected).toBe(6);
      // Past the failure (9 readings) with a few to spare; each acknowledged reading is stored.
      await expect
        .poll(() => Math.min(...fleet!.devices.map((d) => d.luminaire!.acked)), { timeout: 30_000, interval: 200 })
        .toBeGreaterThanOrEqual(12);
      await fleet.stop();
      await server.service.services.health.evaluateAll();

      const list = await account.api.get('/api/v1/maintenance');
      expect(list.status).toBe(200);
      expect(list.body.items.map((i: { serial: string }) => i.serial)).toEqual([...failing]);
      const item = list.body.items[0] as { state: string; reasons: Array<{ rule: string }> };
      expect(['watch', 'replace_soon', 'failed']).toContain(item.state);
      expect(item.state).toBe('failed');
      expect(item.reasons.map((r) => r.rule)).toEqual(
        expect.arrayContaining(['source_failures', 'thermal_derating', 'supply_faults', 'thermal_shutdown']),
      );
      expect(list.body.counts).toMatchObject({ ok: 5, failed: 1 });
      const healthy = serials.find((s) => !failing.has(s))!;
      expect((await account.api.get(`/api/v1/devices/${healthy}`)).body.health).toMatchObject({ state: 'ok' });
    }, 60_000);
  });
});
