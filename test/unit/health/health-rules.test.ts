import { describe, expect, it } from 'vitest';
import { evaluateHealth, type HealthInput, type HealthState } from '#core/health/health-rules';
import { DEFAULT_HEALTH_THRESHOLDS, HealthThresholdOverrides, thresholdsFor } from '#core/health/health-thresholds';

const quiet: HealthInput['window'] = {
  days: 7,
  thermalDerating: 0,
  thermalShutdown: 0,
  supplyUndervoltage: 0,
  supplyOvervoltage: 0,
  sourceFailures: 0,
  gearTempMaxC: 55,
};
const input = (
  over: Partial<Omit<HealthInput, 'window'>> & { window?: Partial<HealthInput['window']> } = {},
): HealthInput => ({
  operatingHours: 10_000,
  ratedLifeH: 50_000,
  ...over,
  window: { ...quiet, ...over.window },
});

describe('fixture health rules (defaults of docs/fixture-health.md)', () => {
  const cases: Array<[string, HealthInput, HealthState, string | null]> = [
    ['a young, cool, quiet fixture', input(), 'ok', null],
    ['rated life: 79 % is fine', input({ operatingHours: 39_500 }), 'ok', null],
    ['rated life: 80 % is watch', input({ operatingHours: 40_000 }), 'watch', 'rated_life'],
    ['rated life: 100 % is replace soon', input({ operatingHours: 50_000 }), 'replace_soon', 'rated_life'],
    [
      'rated life: the model default when the driver reports none',
      input({ operatingHours: 45_000, ratedLifeH: null }),
      'watch',
      'rated_life',
    ],
    ['rated life: never reported operating time says nothing', input({ operatingHours: null }), 'ok', null],
    ['gear temperature 74.9 °C is fine', input({ window: { gearTempMaxC: 74.9 } }), 'ok', null],
    ['gear temperature 75 °C is watch', input({ window: { gearTempMaxC: 75 } }), 'watch', 'gear_temperature'],
    [
      'gear temperature 90 °C is replace soon',
      input({ window: { gearTempMaxC: 90 } }),
      'replace_soon',
      'gear_temperature',
    ],
    ['derating 6 in 7 days is fine', input({ window: { thermalDerating: 6 } }), 'ok', null],
    ['derating once a day is watch', input({ window: { thermalDerating: 7 } }), 'watch', 'thermal_derating'],
    [
      'derating 10 a day is replace soon',
      input({ window: { thermalDerating: 70 } }),
      'replace_soon',
      'thermal_derating',
    ],
    [
      'one thermal shutdown in the window is watch',
      input({ window: { thermalShutdown: 1 } }),
      'watch',
      'thermal_shutdown',
    ],
    [
      'a shutdown every day is replace soon',
      input({ window: { thermalShutdown: 7 } }),
      'replace_soon',
      'thermal_shutdown',
    ],
    ['supply faults 13 in 7 days are fine', input({ window: { supplyUndervoltage: 13 } }), 'ok', null],
    [
      'supply faults twice a day (under + over) are watch',
      input({ window: { supplyUndervoltage: 7, supplyOvervoltage: 7 } }),
      'watch',
      'supply_faults',
    ],
    [
      'supply faults 20 a day are replace soon',
      input({ window: { supplyUndervoltage: 140 } }),
      'replace_soon',
      'supply_faults',
    ],
    ['a light source failure is failed', input({ window: { sourceFailures: 1 } }), 'failed', 'source_failures'],
    [
      'no days of data: rates say nothing, lifetime still counts',
      input({ operatingHours: 48_000, window: { days: 0, thermalDerating: 99 } }),
      'watch',
      'rated_life',
    ],
    [
      'worst reason wins: failed over replace soon',
      input({ operatingHours: 60_000, window: { sourceFailures: 2, thermalShutdown: 7 } }),
      'failed',
      'source_failures',
    ],
  ];
  it.each(cases)('%s', (_name, i, state, firstRule) => {
    const verdict = evaluateHealth(i, DEFAULT_HEALTH_THRESHOLDS);
    expect(verdict.state).toBe(state);
    expect(verdict.reasons[0]?.rule ?? null).toBe(firstRule);
    for (const r of verdict.reasons) expect(r.text.length).toBeGreaterThan(10);
  });

  it('reasons are in words with the figures', () => {
    const v = evaluateHealth(input({ operatingHours: 52_000 }), DEFAULT_HEALTH_THRESHOLDS);
    expect(v.reasons[0]!.text).toBe('52,000 operating hours: 104 % of the rated life of 50,000 h (limit 100 %)');
  });

  it('urgency sorts by state, then by how far past the limit', () => {
    const hotter = evaluateHealth(input({ window: { gearTempMaxC: 120 } }), DEFAULT_HEALTH_THRESHOLDS);
    const warm = evaluateHealth(input({ window: { gearTempMaxC: 91 } }), DEFAULT_HEALTH_THRESHOLDS);
    const watch = evaluateHealth(input({ window: { gearTempMaxC: 89 } }), DEFAULT_HEALTH_THRESHOLDS);
    const failed = evaluateHealth(input({ window: { sourceFailures: 1 } }), DEFAULT_HEALTH_THRESHOLDS);
    expect([watch, warm, failed, hotter].sort((a, b) => b.urgency - a.urgency)).toEqual([failed, hotter, warm, watch]);
  });

  it("a model's overrides change the judgement (a driver rated for 100,000 h and 105 °C)", () => {
    const t = thresholdsFor({ rated_life_h: 100_000, gear_temp_watch_c: 95, gear_temp_replace_c: 105 });
    expect(
      evaluateHealth(input({ operatingHours: 60_000, ratedLifeH: null, window: { gearTempMaxC: 92 } }), t).state,
    ).toBe('ok');
    expect(
      evaluateHealth(
        input({ operatingHours: 60_000, ratedLifeH: null, window: { gearTempMaxC: 92 } }),
        DEFAULT_HEALTH_THRESHOLDS,
      ).state,
    ).toBe('replace_soon');
  });

  it('overrides are validated: unknown keys and a watch level above its replace level are refused', () => {
    expect(HealthThresholdOverrides.safeParse({ rated_life_h: 70_000 }).success).toBe(true);
    expect(HealthThresholdOverrides.safeParse({ rated_lfe_h: 70_000 }).success).toBe(false);
    const bad = HealthThresholdOverrides.safeParse({ gear_temp_watch_c: 95 });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toContain('gear_temp_replace_c');
  });
});
