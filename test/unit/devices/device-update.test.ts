import { describe, it, expect } from 'vitest';
import { UpdateDeviceInput, planDeviceUpdate, type DeviceUpdateBase } from '#core/devices/device-update';
import { DomainError } from '#core/shared/errors';

const device: DeviceUpdateBase = {
  id: 'd1',
  serial: 'SN-1',
  name: 'Lamp',
  tags: { site: 'north' },
  desiredConfig: { dim_level: 50, heartbeat_interval_s: 60 },
  desiredConfigVersion: 3,
};
const by = { accountId: 'a1', principal: 'user:ann' };
const plan = (patch: unknown) => planDeviceUpdate(device, UpdateDeviceInput.parse(patch), by);

describe('device PATCH', () => {
  it.each<[string, unknown, string[]]>([
    ['an empty patch', {}, []],
    ['the same name', { name: 'Lamp' }, []],
    ['the same name padded', { name: '  Lamp ' }, []],
    ['the same tags', { tags: { site: 'north' } }, []],
    ['removing an absent tag', { tags: { floor: null } }, []],
    ['the same configuration', { config: { dim_level: 50 } }, []],
    ['a rename', { name: 'Hall lamp' }, ['name']],
    ['a tag', { tags: { floor: '2' } }, ['tags']],
    ['a configuration key', { config: { dim_level: 70 } }, ['config']],
    ['everything', { config: { dim_level: 70 }, tags: { site: null }, name: 'Hall' }, ['name', 'tags', 'config']],
  ])('%s changes %j', (_, patch, changes) => {
    const result = plan(patch);
    expect(result.changes).toEqual(changes);
    expect(result.history.map((h) => h.type)).toEqual(
      changes.map((c) => ({ name: 'renamed', tags: 'tags_changed', config: 'config_changed' })[c]),
    );
  });

  it('a configuration change bumps the desired version and records what changed', () => {
    const result = plan({ config: { dim_level: 70, timezone: 'Europe/Berlin' } });
    expect(result.config).toEqual({
      version: 4,
      config: { dim_level: 70, heartbeat_interval_s: 60, timezone: 'Europe/Berlin' },
    });
    expect(result.history).toEqual([
      {
        accountId: 'a1',
        deviceId: 'd1',
        type: 'config_changed',
        data: { version: 4, changed: ['dim_level', 'timezone'], config: result.config!.config, by: 'user:ann' },
      },
    ]);
  });

  it('a rename and a tag change say what they were', () => {
    const result = plan({ name: 'Hall', tags: { site: null, floor: '2' } });
    expect(result.name).toBe('Hall');
    expect(result.tags).toEqual({ floor: '2' });
    expect(result.history).toEqual([
      { accountId: 'a1', deviceId: 'd1', type: 'renamed', data: { from: 'Lamp', to: 'Hall', by: 'user:ann' } },
      {
        accountId: 'a1',
        deviceId: 'd1',
        type: 'tags_changed',
        data: { set: { floor: '2' }, removed: ['site'], by: 'user:ann' },
      },
    ]);
  });

  it('refuses more than 50 tags after the merge, naming the count', () => {
    const full = { ...device, tags: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`t${i}`, 'v'])) };
    expect(planDeviceUpdate(full, UpdateDeviceInput.parse({ tags: { t0: 'w' } }), by).changes).toEqual(['tags']);
    let error: unknown;
    try {
      planDeviceUpdate(full, UpdateDeviceInput.parse({ tags: { extra: 'v' } }), by);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(DomainError);
    expect((error as DomainError).errors).toEqual([{ field: 'tags', message: 'would have 51 tags; at most 50' }]);
    // Removing one while adding one stays within the limit.
    expect(planDeviceUpdate(full, UpdateDeviceInput.parse({ tags: { t0: null, extra: 'v' } }), by).changes).toEqual([
      'tags',
    ]);
  });

  it.each<[string, unknown, string]>([
    ['a read-only field', { status: 'online' }, 'read-only: status (settable: name, tags, config, site)'],
    ['an unknown field', { colour: 'red' }, 'unknown: colour (settable: name, tags, config, site)'],
    [
      'both',
      { serial: 'X', colour: 'red', firmware: '1.0' },
      'read-only: serial, firmware; unknown: colour (settable: name, tags, config, site)',
    ],
  ])('refuses %s, saying which', (_, patch, message) => {
    const result = UpdateDeviceInput.safeParse(patch);
    expect(result.success).toBe(false);
    expect(result.error!.issues.map((i) => i.message)).toEqual([message]);
  });

  it.each<[string, unknown]>([
    ['an empty name', { name: '  ' }],
    ['a name over 200 characters', { name: 'n'.repeat(201) }],
    ['an unknown configuration key', { config: { brightness: 1 } }],
    ['a configuration value out of range', { config: { dim_level: 101 } }],
  ])('refuses %s', (_, patch) => {
    expect(UpdateDeviceInput.safeParse(patch).success).toBe(false);
  });
});
