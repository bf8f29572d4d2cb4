import { describe, expect, it } from 'vitest';
import { evaluateHealth, type HealthInput, type HealthState, type HealthVerdict } from '#core/health/health-rules';
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

describe('failed sticks until the light source failure counter restarts (docs/fixture-health.md "Failed sticks")', () => {
  const mark = { segment: 0, failures: 1, at: '2026-11-01T10:00:00.000Z' };
  const cases: Array<[string, HealthInput, HealthState, HealthVerdict['failedMark']]> = [
    [
      'a failure in the window: failed, marked in the current segment (when: set by the caller)',
      input({ window: { sourceFailures: 1 }, sourceFailureCounter: { segment: 0, value: 1 } }),
      'failed',
      { segment: 0, failures: 1, at: null },
    ],
    [
      'the window moved past the failure, same segment: still failed, the mark kept',
      input({ window: { sourceFailures: 0 }, sourceFailureCounter: { segment: 0, value: 1 }, failedMark: mark }),
      'failed',
      mark,
    ],
    [
      'another failure in the same segment: failed, the first date kept, the larger count',
      input({ window: { sourceFailures: 2 }, sourceFailureCounter: { segment: 0, value: 3 }, failedMark: mark }),
      'failed',
      { segment: 0, failures: 2, at: mark.at },
    ],
    [
      'the counter restarted (driver replaced) at 0: ok, though the window still holds the old failure',
      input({ window: { sourceFailures: 1 }, sourceFailureCounter: { segment: 1, value: 0 }, failedMark: mark }),
      'ok',
      mark,
    ],
    [
      'the new driver fails too: failed again, marked in the new segment',
      input({ window: { sourceFailures: 2 }, sourceFailureCounter: { segment: 1, value: 1 }, failedMark: mark }),
      'failed',
      { segment: 1, failures: 1, at: null },
    ],
    ['never failed, never reported the counter: ok, no mark', input(), 'ok', null],
  ];
  it.each(cases)('%s', (_name, i, state, failedMark) => {
    const v = evaluateHealth(i, DEFAULT_HEALTH_THRESHOLDS);
    expect(v.state).toBe(state);
    expect(v.failedMark).toEqual(failedMark);
  });

  it('says why a device is still failed', () => {
    const v = evaluateHealth(
      input({ sourceFailureCounter: { segment: 0, value: 2 }, failedMark: { ...mark, failures: 2 } }),
      DEFAULT_HEALTH_THRESHOLDS,
    );
    expect(v.reasons[0]!.text).toBe(
      'Light source failed 2 times (first judged failed on 2026-11-01); failed until its failure counter restarts (driver replaced)',
    );
  });
});

describe('reason texts count in words', () => {
  const texts = (i: HealthInput): string[] => evaluateHealth(i, DEFAULT_HEALTH_THRESHOLDS).reasons.map((r) => r.text);
  it.each([
    [input({ window: { sourceFailures: 1 } }), 'Light source failed 1 time in the last 7 days'],
    [input({ window: { sourceFailures: 2 } }), 'Light source failed 2 times in the last 7 days'],
    [input({ window: { thermalShutdown: 1 } }), '1 thermal shutdown in 7 days (limit 1)'],
    [
      input({ window: { days: 1, thermalShutdown: 0, gearTempMaxC: 76 } }),
      'Driver reached 76 °C in the last 7 days (limit 75 °C)',
    ],
    [input({ window: { days: 1, thermalDerating: 2 } }), 'Thermal derating 2 times a day over 1 day (limit 1)'],
  ])('%#: %s', (i, text) => {
    expect(texts(i)).toContain(text);
  });
  it('no reason says "(s)"', () => {
    const all = texts(
      input({
        operatingHours: 60_000,
        window: {
          days: 1,
          sourceFailures: 1,
          thermalShutdown: 1,
          thermalDerating: 1,
          supplyUndervoltage: 1,
          supplyOvervoltage: 2,
          gearTempMaxC: 95,
        },
      }),
    );
    expect(all.length).toBeGreaterThan(4);
    for (const t of all) expect(t).not.toMatch(/\(s\)/);
  });
});
