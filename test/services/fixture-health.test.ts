import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { HarnessAccount, ServiceHarness } from '../helpers/service-harness';
import { startLuminaireHarness, type LuminaireHarness } from '../helpers/luminaire-harness';
import { ifStarted } from '../helpers/teardown';
import { ManualClock } from '#core/shared/clock';

/**
 * Fixture health over a test database (docs/fixture-health.md): verdicts from the luminaire
 * roll-ups, the maintenance list, `device.health_changed`, a model's thresholds, and the
 * warranty evidence an unclaim does not erase, tenant-isolated.
 */
describe('fixture health', () => {
  const clock = new ManualClock('2026-11-20T00:00:00Z');
  let harness: ServiceHarness;
  let acme: HarnessAccount;
  let other: HarnessAccount;
  let sendAsIs: LuminaireHarness['send'];

  beforeAll(async () => {
    const lux = await startLuminaireHarness({ clock, serials: [['H-1', 'H-2', 'H-3'], ['X-1']] });
    ({ harness, send: sendAsIs } = lux);
    [acme, other] = lux.accounts as [HarnessAccount, HarnessAccount];
    await harness.services.devices.update(acme.admin, { serial: 'H-2', patch: { tags: { floor: '2' } } });
  });
  afterAll(async () => ifStarted(harness)?.close());

  /** A reading taken at the clock's time. */
  const send = (acc: HarnessAccount, serial: string, payload: Record<string, unknown>): Promise<void> =>
    sendAsIs(acc, serial, { at: clock.now().toISOString(), ...payload });

  it('judges each device from its readings, lists the unhealthy ones most urgent first, and tells webhooks', async () => {
    // Seven days: H-1 derates 12 times a day and runs hot; H-2 fails its light source on day 5; H-3 is quiet.
    for (let day = 0; day < 7; day++) {
      clock.set(new Date(Date.UTC(2026, 10, 20 + day, 12)).toISOString());
      await send(acme, 'H-1', {
        gear_thermal_derating: 12 * (day + 1),
        gear_temp_c: 80 + day,
        source_on_s: 20_000 * 3600 + day * 43_200,
      });
      await send(acme, 'H-2', { source_failures: day >= 5 ? 1 : 0, gear_temp_c: 50, source_on_s: 41_000 * 3600 });
      await send(acme, 'H-3', { gear_thermal_derating: 0, gear_temp_c: 45, source_on_s: 1000 * 3600 });
      await send(other, 'X-1', { source_failures: day, gear_temp_c: 95 });
    }
    await harness.services.health.evaluateAll();

    const list = await harness.services.health.maintenance(acme.admin, {});
    expect(list.map((i) => [i.serial, i.state])).toEqual([
      ['H-2', 'failed'],
      ['H-1', 'replace_soon'],
    ]);
    expect(list[1]!.reasons.map((r) => r.rule)).toEqual(['thermal_derating', 'gear_temperature']);
    expect(list[0]!.reasons.map((r) => r.text)).toContain('Light source failed 1 time in the last 7 days');
    expect(await harness.services.health.countsByState(acme.admin)).toEqual({
      ok: 1,
      watch: 0,
      replace_soon: 1,
      failed: 1,
    });
    expect(
      (await harness.services.health.maintenance(acme.admin, { tag: { key: 'floor', value: '2' } })).map(
        (i) => i.serial,
      ),
    ).toEqual(['H-2']);
    expect(await harness.services.health.maintenance(acme.admin, { model: 'nope' })).toEqual([]);

    const events = await harness.database
      .knex('events')
      .where({ account_id: acme.accountId, type: 'device.health_changed' })
      .select('data');
    expect(
      events.map((e: { data: { serial: string; state: string } }) => [e.data.serial, e.data.state]).sort(),
    ).toEqual([
      ['H-1', 'replace_soon'],
      ['H-2', 'failed'],
    ]);
    // A second pass with nothing new changes nothing and tells nobody again.
    expect(await harness.services.health.evaluateAccount({ accountId: acme.accountId })).toBe(0);
  });

  it("a model's thresholds change the verdict (a driver rated for 110 °C)", async () => {
    await harness.services.health.setModelThresholds(acme.admin, {
      model: 'LX-200',
      overrides: { gear_temp_watch_c: 100, gear_temp_replace_c: 110, derating_replace_per_day: 50 },
    });
    const h1 = await harness.services.health.deviceHealth(acme.admin, { serial: 'H-1' });
    expect(h1).toMatchObject({ state: 'watch', reasons: [{ rule: 'thermal_derating', state: 'watch' }] });
    await expect(
      harness.services.health.setModelThresholds(acme.admin, {
        model: 'LX-200',
        overrides: { gear_temp_watch_c: 120 },
      }),
    ).rejects.toMatchObject({ code: 'validation_failed' });
    await expect(harness.services.health.deviceHealth(other.admin, { serial: 'H-1' })).rejects.toMatchObject({
      code: 'not_found',
    });
  });

  it('rates per firmware version come from the roll-ups', async () => {
    const rates = await harness.services.health.versionRates(acme.admin, {
      from: new Date('2026-11-19T00:00:00Z'),
      to: new Date('2026-11-28T00:00:00Z'),
    });
    expect(rates).toHaveLength(1);
    expect(rates[0]).toMatchObject({ model: 'LX-200', devices: 3, deviceDays: 21 });
    // H-1's counter rose 12 a day over 6 deltas (the first reading starts the counter): 72 in 21 device-days.
    expect(rates[0]!.events.thermal_derating).toBe(72);
    expect(rates[0]!.per1000DeviceDays.thermal_derating).toBeCloseTo(3428.57, 1);
    expect(rates[0]!.per1000DeviceDays.unexpected_reboots).toBeNull();
  });

  it('the warranty evidence outlives an unclaim for the account that owned the device, and only for it', async () => {
    const before = await harness.services.warranty.report(acme.admin, { serial: 'H-1' });
    expect(before).toMatchObject({ serial: 'H-1', model: 'LX-200', warrantyYears: 5 });
    expect(before.operatingHours).toBeGreaterThan(20_000);
    expect(before.faultCounters).toEqual([expect.objectContaining({ month: '2026-11', days: 7, thermalDerating: 72 })]);
    expect(before.firmwareHistory.length).toBeGreaterThan(0);

    await harness.services.devices.unclaim(acme.admin, { serial: 'H-1' });
    const after = await harness.services.warranty.report(acme.admin, { serial: 'H-1' });
    expect(after.faultCounters).toEqual(before.faultCounters);
    expect(after.claims[0]!.unclaimedAt).not.toBeNull();
    await expect(harness.services.warranty.report(other.admin, { serial: 'H-1' })).rejects.toMatchObject({
      code: 'not_found',
    });

    // Past the warranty period, the record goes; the roll-ups stay with the account (fleet energy).
    clock.set('2031-12-01T00:00:00Z');
    expect(await harness.services.warranty.pruneExpired()).toBe(1);
    await expect(harness.services.warranty.report(acme.admin, { serial: 'H-1' })).rejects.toMatchObject({
      code: 'not_found',
    });
  });
});
