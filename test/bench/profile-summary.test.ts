import { describe, expect, it } from 'vitest';
import { placeOf, summarizeProfile, type Profile } from '#bench/lib/profile-summary';

const frame = (functionName: string, url: string, lineNumber = 0) => ({ functionName, url, lineNumber });

/**
 * root -> handle (broker/src/hooks/authorize-hooks.ts) -> parse (node_modules/zod)
 *      -> (idle)
 * Samples: parse 3 x 100 µs, handle 1 x 100 µs, idle 6 x 100 µs.
 */
const profile: Profile = {
  nodes: [
    { id: 1, callFrame: frame('(root)', ''), children: [2, 4] },
    { id: 2, callFrame: frame('handle', 'file:///work/main/broker/src/hooks/authorize-hooks.ts', 41), children: [3] },
    { id: 3, callFrame: frame('parse', 'file:///work/main/node_modules/zod/v4/core/parse.js', 9) },
    { id: 4, callFrame: frame('(idle)', '') },
  ],
  samples: [3, 3, 2, 4, 4, 4, 4, 4, 4, 3],
  timeDeltas: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100],
  startTime: 0,
  endTime: 1000,
};

describe('CPU profile summary', () => {
  it('groups self time by package and by our source folder', () => {
    expect(placeOf('file:///work/main/node_modules/@scope/pkg/lib/a.js')).toBe('@scope/pkg');
    expect(placeOf('file:///work/main/broker/src/hooks/authorize-hooks.ts')).toBe('broker/src/hooks');
    expect(placeOf('node:internal/streams/readable')).toBe('node:internal/streams/readable');
  });

  it('ranks functions by self time and by inclusive time, with their file and line', () => {
    const summary = summarizeProfile(profile);
    expect(summary.totalMicros).toBe(1000);
    expect(summary.busyMicros).toBe(400);
    expect(summary.selfByFunction.map((s) => [s.key, s.percent])).toEqual([
      ['(idle) (native or V8):1', 60],
      ['parse zod/parse.js:10', 30],
      ['handle broker/src/hooks/authorize-hooks.ts:42', 10],
    ]);
    expect(summary.selfByPlace.find((s) => s.key === 'zod')?.micros).toBe(300);
    // handle's own 100 µs plus the 300 µs of parse it called.
    expect(summary.inclusiveByFunction.find((s) => s.key.startsWith('handle '))).toEqual({
      key: 'handle broker/src/hooks/authorize-hooks.ts:42',
      micros: 400,
      percent: 40,
    });
    expect(summary.inclusiveByFunction.some((s) => s.key.startsWith('(root)'))).toBe(false);
  });

  it('keeps only the top N rows', () => {
    expect(summarizeProfile(profile, 1).selfByFunction).toHaveLength(1);
  });
});
