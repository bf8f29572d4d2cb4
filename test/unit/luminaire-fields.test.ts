import { describe, it, expect } from 'vitest';
import { readLuminaire, LUMINAIRE_CLOCK_TOLERANCE_S } from '#protocol/luminaire-fields';
import { publishKindFor, publishRefusalOf } from '#broker/hooks/authorize';

/** How the service reads `devices/{serial}/luminaire` (docs/device-protocol.md "Luminaire data"). */
describe('luminaire reading, field by field', () => {
  const now = new Date('2026-11-27T10:00:00Z');
  const read = (payload: unknown) =>
    readLuminaire(typeof payload === 'string' ? payload : JSON.stringify(payload), now);

  it.each([
    ['power_w', -1, 'out_of_range'],
    ['power_w', '30', 'wrong_type'],
    ['output_level_pct', 100.5, 'out_of_range'],
    ['gear_starts', 2.5, 'not_an_integer'],
    ['gear_temp_c', -61, 'out_of_range'],
    ['energy_wh', null, 'wrong_type'],
    ['rated_life_h', 1_000_001, 'out_of_range'],
    ['at', 'yesterday', 'invalid_format'],
  ])('refuses %s = %j (%s) and keeps the other fields', (field, value, reason) => {
    const r = read({ supply_voltage_v: 230, [field]: value });
    expect(r).toMatchObject({ ok: true, values: { supply_voltage_v: 230 }, refused: [{ field, reason }] });
  });

  it('takes the device time within the tolerance, the time of receipt otherwise', () => {
    const within = new Date(now.getTime() - (LUMINAIRE_CLOCK_TOLERANCE_S - 1) * 1000).toISOString();
    expect(read({ at: within, power_w: 1 })).toMatchObject({ at: new Date(within), badClock: false });
    const ahead = new Date(now.getTime() + (LUMINAIRE_CLOCK_TOLERANCE_S + 1) * 1000).toISOString();
    expect(read({ at: ahead, power_w: 1 })).toMatchObject({ at: now, badClock: true });
    expect(read({ power_w: 1 })).toMatchObject({ at: now, badClock: true });
    expect(read({ at: '2026-11-27T11:00:00+01:00', power_w: 1 })).toMatchObject({ at: now, badClock: false });
  });

  it('drops only what is not a JSON object, or above 4 KB', () => {
    expect(read('not json')).toEqual({ ok: false, reason: 'not_json' });
    expect(read([1, 2])).toEqual({ ok: false, reason: 'not_object' });
    expect(read({ power_w: 1, pad: 'x'.repeat(5000) })).toEqual({ ok: false, reason: 'too_large' });
    // An own __proto__ key from JSON.parse is an unknown field: ignored.
    expect(read('{"__proto__": {"power_w": 1}, "power_w": 2}')).toMatchObject({
      ok: true,
      values: { power_w: 2 },
      refused: [],
    });
  });

  it('is published by a device on its own topic only', () => {
    expect(publishKindFor('LX-1', 'devices/LX-1/luminaire')).toBe('luminaire');
    expect(publishKindFor('LX-1', 'devices/LX-2/luminaire')).toBeNull();
    expect(publishRefusalOf('LX-1', 'devices/LX-2/luminaire')).toBe('other_device');
  });
});
