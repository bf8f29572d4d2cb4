import { describe, it, expect } from 'vitest';
import { LuminaireModel, scheduledLevel } from '#simulator/luminaire-model';
import { LuminaireReading } from '#protocol/luminaire-fields';

/** A seeded random source, so the simulated luminaire is the same on every run. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
}

describe('simulated luminaire (simulator --luminaire)', () => {
  const day = (model: LuminaireModel, start: string, stepS: number, steps: number) =>
    Array.from({ length: steps }, (_, i) => model.read(new Date(Date.parse(start) + i * stepS * 1000)));

  it('follows its dimming schedule by local time, with energy consistent with power over time', () => {
    const model = new LuminaireModel({ random: seeded(1), timeZone: 'Europe/Berlin', driverReplacementPerDay: 0 });
    const readings = day(model, '2026-11-27T00:00:00Z', 60, 24 * 60);
    for (const r of readings) expect(LuminaireReading.strict().safeParse(r).success).toBe(true);
    // 19:00 in Berlin (18:00 UTC) is evening: full output; 12:00 local is daylight: off.
    expect(readings[18 * 60]!.output_level_pct).toBe(scheduledLevel(19));
    expect(readings[11 * 60]!.output_level_pct).toBe(0);
    let integral = 0;
    for (let i = 1; i < readings.length; i++)
      integral += ((readings[i - 1]!.power_w! + readings[i]!.power_w!) / 2) * (60 / 3600);
    const counted = readings.at(-1)!.energy_wh! - readings[0]!.energy_wh!;
    expect(Math.abs(counted - integral)).toBeLessThan(2);
    expect(readings.at(-1)!.gear_starts!).toBeGreaterThan(readings[0]!.gear_starts!);
    expect(readings.at(-1)!.gear_operating_s! - readings[0]!.gear_operating_s!).toBeGreaterThanOrEqual(86_340 - 1);
  });

  it('runs warmer under load than when off', () => {
    const model = new LuminaireModel({ random: seeded(2), timeZone: 'UTC', driverReplacementPerDay: 0 });
    const readings = day(model, '2026-11-27T00:00:00Z', 60, 24 * 60);
    const at = (h: number) => readings[h * 60]!.gear_temp_c!;
    expect(at(21)).toBeGreaterThan(at(16) + 20);
  });

  it('now and then has its driver replaced: counters start again from zero', () => {
    const model = new LuminaireModel({ random: seeded(3), driverReplacementPerDay: 1e9 });
    const [first, second] = day(model, '2026-11-27T18:00:00Z', 900, 2);
    expect(second!.energy_wh!).toBeLessThan(first!.energy_wh! + 1);
    expect(second!.gear_operating_s!).toBeLessThanOrEqual(900);
  });
});
