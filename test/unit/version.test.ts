import { describe, it, expect } from 'vitest';
import { compareVersions, versionKey, isValidVersion } from '#core/shared/version';
import { parseVersion, versionSortKey } from '#protocol/version';

describe('firmware version order', () => {
  it.each([
    ['1.10.0', '1.9.0'],
    ['1.9.2', '1.9'],
    ['2.0.0', '2.0.0-rc.1'],
    ['2.0.0-rc.2', '2.0.0-rc.1'],
    ['2.0.0-rc.10', '2.0.0-rc.9'],
    ['2.0.0-rc.1', '2.0.0-beta.5'],
    ['2.0.0-alpha.1', '2.0.0-alpha'],
    ['2.0.0-alpha', '2.0.0-1'],
    ['1.4.2.7', '1.4.2'],
    ['1.4.2.10', '1.4.2.9'],
    ['10.0', '9.99.99.99'],
  ])('%s is newer than %s', (newer, older) => {
    expect(compareVersions(newer, older)).toBeGreaterThan(0);
    expect(compareVersions(older, newer)).toBeLessThan(0);
    expect(versionKey(newer) > versionKey(older)).toBe(true);
  });

  it('treats missing parts as zero and ignores build metadata', () => {
    expect(compareVersions('1.4', '1.4.0')).toBe(0);
    expect(compareVersions('1.4.0+build.7', '1.4.0')).toBe(0);
  });

  it.each(['', 'v1.0', '1..2', '1.2.3.4.5', '1.2-', 'abc', '1.0 ', '1.2.3-rc..1'])('rejects %j', (bad) => {
    expect(isValidVersion(bad)).toBe(false);
  });

  it('answers a remembered key like a parsed one, past its memory and after a refusal', () => {
    const parsedKey = (v: string) => versionSortKey(parseVersion(v)!);
    expect(versionKey('2.0.0-rc.1')).toBe(parsedKey('2.0.0-rc.1'));
    // Twice: the second answer comes from memory and must not differ.
    expect(versionKey('2.0.0-rc.1')).toBe(parsedKey('2.0.0-rc.1'));
    // An invalid version throws every time (a refusal is never remembered as a key).
    expect(() => versionKey('v1.0')).toThrow(/not a dotted version/);
    expect(() => versionKey('v1.0')).toThrow(/not a dotted version/);
    // More distinct versions than it remembers: every key stays right, before and after.
    const many = Array.from({ length: 2500 }, (_, i) => `${i % 7}.${i}.${i % 3}`);
    for (const v of [...many, ...many.slice(0, 10)]) expect(versionKey(v)).toBe(parsedKey(v));
    expect(compareVersions('1.10.0', '1.9.0')).toBeGreaterThan(0);
  });
});
