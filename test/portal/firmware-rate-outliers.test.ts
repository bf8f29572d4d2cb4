import { describe, expect, it } from 'vitest';
import { rateOutliers, versionKey, type VersionFigures } from '#portal/features/firmware/rate-outliers';

const v = (firmware: string | null, deviceDays: number, derating: number | null, model = 'LX-200'): VersionFigures => ({
  model,
  firmware,
  exposure: { thermalDerating: deviceDays },
  events: { thermalDerating: derating },
});
const marked = (versions: VersionFigures[]) =>
  [...rateOutliers(versions, ['thermalDerating']).entries()].map(([key, signals]) => [key, [...signals]]);

/** The firmware page marks a version whose rate is more than twice its model's other versions together. */
describe('firmware rate outliers', () => {
  it.each([
    { case: 'three times the others', versions: [v('1.0', 100, 10), v('2.0', 100, 30)], expected: ['2.0'] },
    { case: 'exactly twice is not above', versions: [v('1.0', 100, 10), v('2.0', 100, 20)], expected: [] },
    { case: 'too few events to say', versions: [v('1.0', 100, 0), v('2.0', 10, 2)], expected: [] },
    {
      case: 'three events where the others saw none',
      versions: [v('1.0', 100, 0), v('2.0', 10, 3)],
      expected: ['2.0'],
    },
    {
      case: 'the others pooled, not each one',
      versions: [v('1.0', 100, 2), v('1.1', 100, 38), v('2.0', 100, 30)],
      expected: ['1.1'],
    },
    { case: 'a version alone has nothing to compare with', versions: [v('1.0', 100, 50)], expected: [] },
    { case: 'not measured is never marked', versions: [v('1.0', 100, 0), v('2.0', 100, null)], expected: [] },
    {
      case: 'other models do not count',
      versions: [v('1.0', 100, 10), v('2.0', 100, 15), v('9.0', 100, 0, 'GW-10'), v('9.1', 100, 0, 'GW-10')],
      expected: [],
    },
  ])('$case', ({ versions, expected }) => {
    expect(marked(versions)).toEqual(
      expected.map((firmware) => [versionKey({ model: 'LX-200', firmware }), ['thermalDerating']]),
    );
  });

  it("takes each signal's rate over its own exposure", () => {
    // Reconnects count over the days the devices were heard, deratings over the days with readings.
    const figures = (firmware: string, luminaireDays: number, heardDays: number, reconnects: number | null) => ({
      model: 'LX-200',
      firmware,
      exposure: { thermalDerating: luminaireDays, reconnects: heardDays },
      events: { thermalDerating: 0, reconnects },
    });
    const outliers = rateOutliers(
      [figures('1.0', 100, 100, 10), figures('2.0', 10, 100, 15), figures('3.0', 100, 0, null)],
      ['thermalDerating', 'reconnects'],
    );
    expect([...outliers.keys()]).toEqual([]);
    const louder = rateOutliers([figures('1.0', 100, 100, 10), figures('2.0', 100, 40, 10)], ['reconnects']);
    expect([...louder.entries()]).toEqual([
      [versionKey({ model: 'LX-200', firmware: '2.0' }), new Set(['reconnects'])],
    ]);
  });

  it('keeps a version that reported no firmware apart from the others', () => {
    expect(marked([v(null, 100, 40), v('2.0', 100, 5)])).toEqual([
      [versionKey({ model: 'LX-200', firmware: null }), ['thermalDerating']],
    ]);
  });
});
