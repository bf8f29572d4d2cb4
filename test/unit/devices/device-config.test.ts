import { describe, it, expect } from 'vitest';
import {
  DeviceConfig,
  DeviceConfigPatch,
  TagsPatch,
  mergeConfig,
  mergeTags,
  type DeviceConfig as Config,
} from '#core/devices/device-config';

const window = { start: '22:00', end: '04:00' };

describe('device configuration merge', () => {
  it.each<[string, Config, Config, Config, string[]]>([
    [
      'sets a key',
      { dim_level: 50 },
      { power_on_level: 80 },
      { dim_level: 50, power_on_level: 80 },
      ['power_on_level'],
    ],
    ['changes a key', { dim_level: 50 }, { dim_level: 70 }, { dim_level: 70 }, ['dim_level']],
    [
      'keeps omitted keys',
      { dim_level: 50, timezone: 'UTC' },
      { timezone: 'Europe/Berlin' },
      { dim_level: 50, timezone: 'Europe/Berlin' },
      ['timezone'],
    ],
    ['the same value changes nothing', { dim_level: 50 }, { dim_level: 50 }, { dim_level: 50 }, []],
    ['an empty patch changes nothing', { dim_level: 50 }, {}, { dim_level: 50 }, []],
    [
      'an equal window changes nothing',
      { maintenance_window: window },
      { maintenance_window: { ...window } },
      { maintenance_window: window },
      [],
    ],
    [
      'a different window',
      { maintenance_window: window },
      { maintenance_window: { start: '01:00', end: '02:00' } },
      { maintenance_window: { start: '01:00', end: '02:00' } },
      ['maintenance_window'],
    ],
    [
      'null removes the window',
      { maintenance_window: window },
      { maintenance_window: null },
      { maintenance_window: null },
      ['maintenance_window'],
    ],
    [
      'null on an absent window records it, unchanged',
      {},
      { maintenance_window: null },
      { maintenance_window: null },
      [],
    ],
    [
      'null on a removed window changes nothing',
      { maintenance_window: null },
      { maintenance_window: null },
      { maintenance_window: null },
      [],
    ],
    [
      'several keys, in patch order',
      { dim_level: 1 },
      { heartbeat_interval_s: 30, dim_level: 2 },
      { dim_level: 2, heartbeat_interval_s: 30 },
      ['heartbeat_interval_s', 'dim_level'],
    ],
  ])('%s', (_, current, patch, config, changed) => {
    const before = structuredClone(current);
    expect(mergeConfig(current, patch)).toEqual({ config, changed });
    expect(current).toEqual(before);
  });
});

describe('device configuration validation', () => {
  it.each<[string, unknown]>([
    ['heartbeat 10 s', { heartbeat_interval_s: 10 }],
    ['heartbeat 3600 s', { heartbeat_interval_s: 3600 }],
    ['dim 0 and 100', { dim_level: 0, power_on_level: 100 }],
    ['an IANA zone', { timezone: 'America/Argentina/Buenos_Aires' }],
    ['a window over midnight', { maintenance_window: window }],
    ['no window', { maintenance_window: null }],
    ['nothing', {}],
  ])('accepts %s', (_, value) => {
    expect(DeviceConfigPatch.safeParse(value).success).toBe(true);
  });

  it.each<[string, unknown, string]>([
    ['heartbeat under 10 s', { heartbeat_interval_s: 9 }, 'heartbeat_interval_s'],
    ['heartbeat over an hour', { heartbeat_interval_s: 3601 }, 'heartbeat_interval_s'],
    ['a fractional heartbeat', { heartbeat_interval_s: 10.5 }, 'heartbeat_interval_s'],
    ['dim below 0', { dim_level: -1 }, 'dim_level'],
    ['dim over 100', { dim_level: 101 }, 'dim_level'],
    ['power-on level over 100', { power_on_level: 101 }, 'power_on_level'],
    ['a level as text', { dim_level: '50' }, 'dim_level'],
    ['an unknown zone', { timezone: 'Mars/Olympus' }, 'timezone'],
    ['null for a key other than the window', { dim_level: null }, 'dim_level'],
    ['a window in 12-hour time', { maintenance_window: { start: '10pm', end: '04:00' } }, 'maintenance_window.start'],
    ['a window at 24:00', { maintenance_window: { start: '22:00', end: '24:00' } }, 'maintenance_window.end'],
    ['an empty window', { maintenance_window: { start: '03:00', end: '03:00' } }, 'maintenance_window'],
    ['a window with an extra key', { maintenance_window: { ...window, days: 'mon' } }, 'maintenance_window'],
    ['an unknown key', { brightness: 5 }, ''],
  ])('refuses %s', (_, value, path) => {
    const result = DeviceConfig.safeParse(value);
    expect(result.success).toBe(false);
    expect(result.error!.issues.map((i) => i.path.join('.'))).toContain(path);
  });
});

describe('tags merge', () => {
  it.each<[string, Record<string, string>, Record<string, string | null>, ReturnType<typeof mergeTags>]>([
    ['adds', { a: '1' }, { b: '2' }, { tags: { a: '1', b: '2' }, set: { b: '2' }, removed: [] }],
    ['changes', { a: '1' }, { a: '2' }, { tags: { a: '2' }, set: { a: '2' }, removed: [] }],
    ['the same value is no change', { a: '1' }, { a: '1' }, { tags: { a: '1' }, set: {}, removed: [] }],
    ['null removes', { a: '1', b: '2' }, { a: null }, { tags: { b: '2' }, set: {}, removed: ['a'] }],
    ['null on an absent tag is no change', { a: '1' }, { z: null }, { tags: { a: '1' }, set: {}, removed: [] }],
    ['an empty value is a value', {}, { a: '' }, { tags: { a: '' }, set: { a: '' }, removed: [] }],
  ])('%s', (_, current, patch, expected) => {
    expect(mergeTags(current, patch)).toEqual(expected);
  });

  it('keeps __proto__ as plain data', () => {
    const merged = mergeTags(JSON.parse('{"__proto__":"x"}') as Record<string, string>, { a: '1' });
    expect(Object.getPrototypeOf(merged.tags)).toBe(Object.prototype);
    expect(Object.keys(merged.tags).sort()).toEqual(['__proto__', 'a']);
  });

  it.each<[string, unknown]>([
    ['a key over 64 characters', { ['k'.repeat(65)]: 'v' }],
    ['an empty key', { '': 'v' }],
    ['a value over 256 characters', { k: 'v'.repeat(257) }],
    ['a number value', { k: 1 }],
    ['more than 100 changes', Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, 'v']))],
    ['an own __proto__ key', JSON.parse('{"__proto__":"x"}')],
  ])('refuses a patch with %s', (_, patch) => {
    expect(TagsPatch.safeParse(patch).success).toBe(false);
  });
});
