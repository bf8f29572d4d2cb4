import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decideFixtureGate,
  FIXTURE_SIGNALS,
  type FixtureGateSettings,
  type FixtureSignal,
  type GroupExposure,
} from '#core/health/fixture-gate';
import { binomialUpperTail, ratioLowerBound, ratioPValue } from '#core/health/rate-ratio';
import { RolloutInput } from '#core/deployments/deployment-types';

const settings: FixtureGateSettings = {
  signals: ['thermal_derating', 'supply_faults'],
  maxRatio: 1.5,
  minDeviceDays: 50,
  minEvents: 3,
  confidence: 0.95,
};
const zero = Object.fromEntries(FIXTURE_SIGNALS.map((s) => [s, 0])) as Record<FixtureSignal, number>;
const group = (
  deviceDays: number,
  counts: Partial<Record<FixtureSignal, number>> = {},
  devices = Math.ceil(deviceDays),
): GroupExposure => ({
  devices,
  deviceDays,
  connectedDeviceDays: deviceDays,
  counts: { ...zero, ...counts },
});

/** mulberry32: a small seeded generator, so a failing simulation can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
/** Poisson sample (Knuth; the means here stay small enough for it). */
function poisson(mean: number, random: () => number): number {
  let n = 0;
  let remaining = mean;
  // Split large means so exp(-mean) does not underflow.
  while (remaining > 0) {
    const m = Math.min(remaining, 30);
    remaining -= m;
    const limit = Math.exp(-m);
    let p = random();
    while (p > limit) {
      n++;
      p *= random();
    }
  }
  return n;
}

describe('rate-ratio statistics', () => {
  it('binomial tail matches a direct sum', () => {
    // P(X >= 3), X ~ Bin(5, 0.3) = 0.16308
    expect(binomialUpperTail(3, 5, 0.3)).toBeCloseTo(0.16308, 5);
    expect(binomialUpperTail(0, 5, 0.3)).toBe(1);
    expect(binomialUpperTail(6, 5, 0.3)).toBe(0);
  });
  it('equal counts over equal exposure: p-value 1/2-ish at ratio 1, lower bound below 1', () => {
    const c = { x1: 10, t1: 100, x2: 10, t2: 100 };
    expect(ratioPValue(c, 1)).toBeGreaterThan(0.4);
    expect(ratioLowerBound(c, 0.05)).toBeLessThan(1);
  });
  it('the lower bound is where the p-value crosses alpha', () => {
    const c = { x1: 40, t1: 100, x2: 10, t2: 100 };
    const lb = ratioLowerBound(c, 0.05);
    expect(ratioPValue(c, lb * 0.99)).toBeLessThan(0.05);
    expect(ratioPValue(c, lb * 1.01)).toBeGreaterThanOrEqual(0.05);
  });
});

describe('fixture health gate', () => {
  it('is off when the rollout names no signal', () => {
    expect(
      decideFixtureGate({ updated: group(100), control: group(100), baseline: null }, { ...settings, signals: [] })
        .state,
    ).toBe('off');
  });

  it('holds its judgement while the updated group has too little exposure', () => {
    const d = decideFixtureGate(
      { updated: group(49, { thermal_derating: 40 }), control: group(1000), baseline: null },
      settings,
    );
    expect(d.state).toBe('insufficient_exposure');
    expect(d.summary).toContain('49 of the 50 device-days');
  });

  it('compares with the model before the deployment when control is empty (the last batch)', () => {
    const d = decideFixtureGate(
      {
        updated: group(200, { thermal_derating: 40 }),
        control: group(0),
        baseline: group(3000, { thermal_derating: 30 }),
      },
      settings,
    );
    expect(d.comparedWith).toBe('baseline');
    expect(d.state).toBe('pause');
    expect(d.summary).toContain('the model before the deployment');
  });

  it('judges unexpected reboots and reconnects over the days the devices were heard, not their luminaire days', () => {
    // Devices without luminaire data: no luminaire device-days, but heard every day.
    const heard = (days: number, counts: Partial<Record<FixtureSignal, number>>): GroupExposure => ({
      ...group(0, counts, days),
      connectedDeviceDays: days,
    });
    const reboots = { ...settings, signals: ['unexpected_reboots', 'reconnects'] as FixtureSignal[] };
    const d = decideFixtureGate(
      {
        updated: heard(100, { unexpected_reboots: 30, reconnects: 4 }),
        control: heard(400, { unexpected_reboots: 8, reconnects: 16 }),
        baseline: null,
      },
      reboots,
    );
    expect(d.state).toBe('pause');
    expect(d.signals.map((s) => [s.signal, s.verdict])).toEqual([
      ['unexpected_reboots', 'worse'],
      ['reconnects', 'within_ratio'],
    ]);
    expect(d.signals[0]).toMatchObject({
      updated: { events: 30, deviceDays: 100, per1000DeviceDays: 300 },
      control: { events: 8, deviceDays: 400, per1000DeviceDays: 20 },
    });
    // Naming a luminaire signal too: those devices have no luminaire exposure, so the gate holds.
    expect(
      decideFixtureGate(
        { updated: heard(100, { unexpected_reboots: 30 }), control: heard(400, {}), baseline: null },
        { ...reboots, signals: ['unexpected_reboots', 'thermal_derating'] },
      ).state,
    ).toBe('insufficient_exposure');
  });

  it('a rollout may name every signal, reboots and reconnects included; an unknown name is refused', () => {
    expect(RolloutInput.safeParse({ fixtureSignals: [...FIXTURE_SIGNALS] }).success).toBe(true);
    expect(RolloutInput.safeParse({ fixtureSignals: ['unexpected_reboots', 'reconnects'] }).success).toBe(true);
    expect(RolloutInput.safeParse({ fixtureSignals: ['reboots'] }).success).toBe(false);
  });

  it('holds when neither control nor baseline has the exposure', () => {
    const d = decideFixtureGate(
      { updated: group(200, { thermal_derating: 40 }), control: group(10), baseline: group(20) },
      settings,
    );
    expect(d).toMatchObject({ state: 'insufficient_exposure', comparedWith: null });
  });

  it('a control with zero events: a couple of updated events do not pause, many do', () => {
    const few = decideFixtureGate(
      { updated: group(100, { supply_faults: 2 }), control: group(1000), baseline: null },
      settings,
    );
    expect(few.state).toBe('pass');
    expect(few.signals.find((s) => s.signal === 'supply_faults')!.verdict).toBe('too_few_events');
    const many = decideFixtureGate(
      { updated: group(100, { supply_faults: 8 }), control: group(1000), baseline: null },
      settings,
    );
    expect(many.state).toBe('pause');
    const e = many.signals.find((s) => s.signal === 'supply_faults')!;
    expect(Number.isFinite(e.ratio)).toBe(true);
    expect(e).toMatchObject({
      verdict: 'worse',
      updated: { events: 8, per1000DeviceDays: 80 },
      control: { events: 0, per1000DeviceDays: 0 },
    });
  });

  it('records its evidence per signal: rates per 1,000 device-days, ratio, bound, p-value', () => {
    const d = decideFixtureGate(
      {
        updated: group(500, { thermal_derating: 60, supply_faults: 5 }),
        control: group(5000, { thermal_derating: 100, supply_faults: 50 }),
        baseline: null,
      },
      settings,
    );
    expect(d.state).toBe('pause');
    expect(d.signals.map((s) => [s.signal, s.verdict])).toEqual([
      ['thermal_derating', 'worse'],
      ['supply_faults', 'within_ratio'],
    ]);
    expect(d.signals[0]).toMatchObject({ updated: { per1000DeviceDays: 120 }, control: { per1000DeviceDays: 20 } });
    expect(d.signals[0]!.ratioLowerBound).toBeGreaterThan(1.5);
    expect(d.summary).toMatch(
      /^thermal derating: 120 per 1,000 device-days updated against 20 for not-yet-updated devices/,
    );
  });

  it('noise in a small sample does not pause (same rate in both groups, 1,000 seeded rollouts)', () => {
    let pauses = 0;
    const random = rng(30);
    for (let i = 0; i < 1000; i++) {
      // A first batch: 20 devices for 3 days against 400 devices, both at 30 derating events per 1,000 device-days.
      const rate = 0.03;
      const updated = group(60, {
        thermal_derating: poisson(rate * 60, random),
        supply_faults: poisson(rate * 60, random),
      });
      const control = group(1200, {
        thermal_derating: poisson(rate * 1200, random),
        supply_faults: poisson(rate * 1200, random),
      });
      if (decideFixtureGate({ updated, control, baseline: null }, settings).state === 'pause') pauses++;
    }
    expect(pauses / 1000).toBeLessThan(0.01);
  });

  it('noise never pauses at the maximum ratio itself more often than the confidence allows (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 31 }),
        fc.double({ min: 0.005, max: 0.5, noNaN: true }),
        fc.integer({ min: 50, max: 2000 }),
        fc.integer({ min: 50, max: 5000 }),
        (seed, rate, t1, t2) => {
          const random = rng(seed);
          let pauses = 0;
          for (let i = 0; i < 200; i++) {
            // The updated group is exactly maxRatio times worse: the limit, not beyond it.
            const updated = group(t1, { thermal_derating: poisson(rate * settings.maxRatio * t1, random) });
            const control = group(t2, { thermal_derating: poisson(rate * t2, random) });
            const d = decideFixtureGate(
              { updated, control, baseline: null },
              { ...settings, signals: ['thermal_derating'] },
            );
            if (d.state === 'pause') pauses++;
          }
          // 5 % by construction (the test is exact, so conservative); 200 draws: allow sampling spread.
          return pauses <= 22;
        },
      ),
      { numRuns: 15, seed: 30 },
    );
  });

  it('a real regression pauses (firmware quadruples derating, 1,000 seeded rollouts)', () => {
    let pauses = 0;
    const random = rng(31);
    for (let i = 0; i < 1000; i++) {
      // 75 devices for 4 days against 500 devices: 30 per 1,000 device-days before, 120 updated.
      const updated = group(300, {
        thermal_derating: poisson(0.12 * 300, random),
        supply_faults: poisson(0.03 * 300, random),
      });
      const control = group(2000, {
        thermal_derating: poisson(0.03 * 2000, random),
        supply_faults: poisson(0.03 * 2000, random),
      });
      if (decideFixtureGate({ updated, control, baseline: null }, settings).state === 'pause') pauses++;
    }
    expect(pauses / 1000).toBeGreaterThan(0.95);
  });
});
