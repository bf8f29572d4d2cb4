import { describe, expect, it } from 'vitest';
import { parseVersionRange, satisfiesRange } from '#core/firmware/version-range';
import { planUpgradePath, type PathVersion } from '#core/deployments/upgrade-path-rules';

const range = (text: string) => {
  const parsed = parseVersionRange(text);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.range;
};

describe('upgrade_from ranges over our version order', () => {
  it.each([
    // range, version, satisfied
    ['>=1.2.0 <2.0.0', '1.2.0', true],
    ['>=1.2.0 <2.0.0', '1.9.9.9', true],
    ['>=1.2.0 <2.0.0', '2.0.0', false],
    ['>=1.2.0 <2.0.0', '1.1.9', false],
    ['>= 1.2 < 2', '1.5', true],
    ['^1.4', '1.4.0', true],
    ['^1.4', '1.99.3.7', true],
    ['^1.4', '2.0.0-rc.1', false],
    ['^1.4', '1.3.9', false],
    ['^0.3.1', '0.3.5', true],
    ['^0.3.1', '0.4.0', false],
    ['^1.2.3.4', '1.2.3.4', true],
    ['^1.2.3.4', '1.2.3.3', false],
    ['~1.2.3', '1.2.9', true],
    ['~1.2.3', '1.3.0', false],
    ['1.2.x || 1.3.x', '1.3.7.1', true],
    ['1.2.x || 1.3.x', '1.4.0', false],
    ['1.2.x || 1.3.x', '1.2.0-beta', false],
    ['1.2', '1.2.5', true],
    ['1.2.3', '1.2.3.0', true],
    ['1.2.3', '1.2.3.1', false],
    ['1.2.3.x', '1.2.3.1', true],
    ['1.2.3.4', '1.2.3.4+build.7', true],
    ['1.0 - 1.4.1', '1.4.1', true],
    ['1.0 - 1.4.1', '1.4.1.1', false],
    ['1.0 - 1.4', '1.4.9', true],
    ['*', '0.0.1-alpha', true],
    ['>1.2', '1.2.9', false],
    ['>1.2', '1.3.0', true],
    ['<=1.2', '1.2.9.9', true],
    ['<1.2', '1.2.0-rc.1', false],
    // Pre-releases are ordered, not excluded (unlike node-semver).
    ['>=1.2.0', '1.3.0-beta.1', true],
    ['<2.0.0', '2.0.0-rc.1', true],
    ['>=2.0.0-rc.2', '2.0.0-rc.10', true],
    ['>=2.0.0-rc.2', '2.0.0-rc.1', false],
    ['=1.0.0-rc.1', '1.0.0-rc.1', true],
  ])('%s holds for %s: %s', (text, version, expected) => {
    expect(satisfiesRange(version, range(text))).toBe(expected);
  });

  it('holds for any version without a range', () => {
    expect(satisfiesRange('0.0.1', null)).toBe(true);
  });

  it.each(['', '  ', '>=1.2.0 <', 'latest', '1.2.3.4.5', '^', '1.x-rc.1', '>=1.2 ||| 2', 'x'.repeat(300), '1.2 - '])(
    'refuses %j with a message',
    (text) => {
      const parsed = parseVersionRange(text);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.message.length).toBeGreaterThan(3);
    },
  );
});

const v = (version: string, upgradeFrom: string | null = null): PathVersion => ({ id: version, version, upgradeFrom });
const plan = (from: string, target: PathVersion, versions: PathVersion[]) => {
  const p = planUpgradePath({ from, target, versions: [...versions, target] });
  return p.kind === 'path' ? p.hops.map((h) => h.version) : p.kind;
};

describe('planUpgradePath', () => {
  it('goes direct when the target allows the version, or no range is set', () => {
    expect(plan('1.0', v('2.0'), [v('1.5')])).toBe('direct');
    expect(plan('1.6', v('2.0', '>=1.5'), [v('1.5')])).toBe('direct');
    expect(plan('2.0.0', v('2.0'), [])).toBe('already');
  });

  it('plans the stepping stone 1.0 -> 1.5 -> 2.0', () => {
    expect(plan('1.0', v('2.0', '>=1.5'), [v('1.5', '>=1.0'), v('1.2')])).toEqual(['1.5', '2.0']);
  });

  it('takes the fewest hops before the newest', () => {
    const versions = [v('1.1'), v('1.2', '1.1.x'), v('1.3', '>=1.0 <1.1'), v('1.4', '1.2.x')];
    // 1.0 -> 1.3 -> 2.0 (two hops) beats 1.0 -> 1.1 -> 1.2 -> 2.0.
    expect(plan('1.0', v('2.0', '1.2.x || 1.3.x'), versions)).toEqual(['1.3', '2.0']);
  });

  it('breaks ties by the newest hop, compared from the first hop on', () => {
    const versions = [v('1.1'), v('1.2'), v('1.3', '<1.2'), v('1.4', '<1.3')];
    // One stepping stone either way (1.3 or 1.4): the newest.
    expect(plan('1.0', v('2.0', '>=1.3 <1.5'), versions)).toEqual(['1.4', '2.0']);
    // The first hop decides: 1.0 -> 1.2 -> 1.3 beats 1.0 -> 1.1 -> 1.4 although 1.4 is newer than 1.3.
    const crossed = [v('1.1'), v('1.2'), v('1.3', '1.2.x'), v('1.4', '1.1.x')];
    expect(plan('1.0', v('2.0', '>=1.3'), crossed)).toEqual(['1.2', '1.3', '2.0']);
  });

  it('handles four-part versions', () => {
    const versions = [v('3.1.0.7'), v('3.1.0.12', '^3.1.0.7')];
    expect(plan('3.0.9.1', v('3.2.0.0', '>=3.1.0.10'), versions)).toEqual(['3.1.0.7', '3.1.0.12', '3.2.0.0']);
  });

  it('never uses pre-releases or versions beyond the target as stepping stones', () => {
    expect(plan('1.0', v('2.0', '>=1.5'), [v('1.5.0-rc.1'), v('2.1')])).toBe('no_upgrade_path');
    // A pre-release target and source are fine themselves.
    expect(plan('1.0.0-beta', v('2.0.0-rc.1', '>=1.5'), [v('1.5', '>=1.0.0-alpha')])).toEqual(['1.5', '2.0.0-rc.1']);
  });

  it('plans downwards for rollbacks, within the two versions', () => {
    expect(plan('2.0', v('1.0', '<1.6'), [v('1.5', '<2.1'), v('0.9')])).toEqual(['1.5', '1.0']);
  });

  it('answers no_upgrade_path when nothing leads there, or the version is not one', () => {
    expect(plan('1.0', v('2.0', '>=1.5'), [v('1.5', '>=1.2')])).toBe('no_upgrade_path');
    expect(plan('garbage', v('2.0', '>=1.5'), [v('1.5')])).toBe('no_upgrade_path');
  });
});
