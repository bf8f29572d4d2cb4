import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { HarnessAccount, ServiceHarness } from '../helpers/service-harness';
import { startLuminaireHarness, type LuminaireHarness } from '../helpers/luminaire-harness';
import { ifStarted } from '../helpers/teardown';
import { ManualClock } from '#core/shared/clock';

/**
 * `failed` sticks (docs/fixture-health.md "Failed sticks"): a device whose light source failed
 * stays failed after the failure left the look-back window, until its failure counter restarts
 * (the driver was replaced); then only the new driver's failures count.
 */
describe('fixture health: failed sticks until the failure counter restarts', () => {
  const clock = new ManualClock('2026-11-01T12:00:00Z');
  let harness: ServiceHarness;
  let acme: HarnessAccount;
  let lux: LuminaireHarness;

  beforeAll(async () => {
    lux = await startLuminaireHarness({ clock, serials: [['S-1', 'S-2']] });
    harness = lux.harness;
    acme = lux.accounts[0]!;
  });
  afterAll(async () => ifStarted(harness)?.close());

  const send = (serial: string, payload: Record<string, unknown>): Promise<void> =>
    lux.send(acme, serial, { at: clock.now().toISOString(), ...payload });
  const day = async (d: number, readings: Record<string, number>): Promise<void> => {
    clock.set(new Date(Date.UTC(2026, 10, d, 12)).toISOString());
    for (const [serial, failures] of Object.entries(readings)) await send(serial, { source_failures: failures });
    await harness.services.health.evaluateAll();
  };
  const state = async (serial: string) => (await harness.services.health.deviceHealth(acme.admin, { serial }))!;

  it('stays failed after the window moved past the failure, and recovers when the driver is replaced', async () => {
    await day(1, { 'S-1': 0, 'S-2': 0 });
    await day(2, { 'S-1': 1, 'S-2': 0 });
    expect((await state('S-1')).state).toBe('failed');

    // Three weeks later (the 7-day window long past), the counter still at 1: still failed, and why.
    await day(23, { 'S-1': 1, 'S-2': 0 });
    const s1 = await state('S-1');
    expect(s1.state).toBe('failed');
    expect(s1.reasons[0]!.text).toBe(
      'Light source failed 1 time (first judged failed on 2026-11-02); failed until its failure counter restarts (driver replaced)',
    );
    expect((await harness.services.health.maintenance(acme.admin, {})).map((i) => i.serial)).toEqual(['S-1']);

    // The driver is replaced: its counter restarts at 0.
    await day(24, { 'S-1': 0, 'S-2': 0 });
    expect((await state('S-1')).state).toBe('ok');
  });

  it("a driver replaced the day after its failure: the old driver's failure, still in the window, no longer counts", async () => {
    await day(25, { 'S-2': 2 });
    expect((await state('S-2')).state).toBe('failed');
    await day(26, { 'S-2': 0 });
    expect((await state('S-2')).state).toBe('ok');
    // The new driver fails in turn: failed again.
    await day(27, { 'S-2': 1 });
    expect(await state('S-2')).toMatchObject({
      state: 'failed',
      reasons: [{ rule: 'source_failures', text: 'Light source failed 1 time in the last 7 days' }],
    });
  });
});
