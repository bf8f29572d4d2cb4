import { describe, it, expect } from 'vitest';
import { acceptedAtOnce, HEARTBEAT_FIELDS, readHeartbeat } from '#protocol/heartbeat-fields';
import { Heartbeat, MAX_DEVICE_PAYLOAD_BYTES } from '#protocol/payloads';

/** A heartbeat is read field by field: one bad field is refused on its own, the rest recorded. */
describe('reading a heartbeat field by field', () => {
  const read = (value: unknown) => readHeartbeat(JSON.stringify(value));

  it.each([
    [{ firmware: 'v1.4.0' }, 'firmware', 'invalid_format', 'v1.4.0'],
    [{ firmware: '1.2.3.4.5' }, 'firmware', 'invalid_format', '1.2.3.4.5'],
    [{ firmware: '' }, 'firmware', 'invalid_format', ''],
    [{ firmware: `1.${'2'.repeat(80)}` }, 'firmware', 'too_long', `1.${'2'.repeat(62)}`],
    [{ firmware: 140 }, 'firmware', 'wrong_type', '140'],
    [{ ip: '10.0.4.300' }, 'ip', 'invalid_format', '10.0.4.300'],
    [{ ip: 'fe80::1%eth0' }, 'ip', 'invalid_format', 'fe80::1%eth0'],
    [{ ip: 167772161 }, 'ip', 'wrong_type', '167772161'],
    [{ uptime_s: 1.5 }, 'uptime_s', 'not_an_integer', '1.5'],
    [{ uptime_s: -1 }, 'uptime_s', 'out_of_range', '-1'],
    [{ uptime_s: '3600' }, 'uptime_s', 'wrong_type', '3600'],
    [{ rssi: 3 }, 'rssi', 'out_of_range', '3'],
    [{ rssi: null }, 'rssi', 'wrong_type', 'null'],
    [{ rssi: { dbm: -61 } }, 'rssi', 'wrong_type', '{"dbm":-61}'],
  ])('%j: refuses %s as %s', (sent, field, reason, value) => {
    expect(read(sent)).toEqual({ ok: true, values: {}, refused: [{ field, reason, value }] });
  });

  it('records the valid fields beside a refused one, and ignores unknown fields', () => {
    const payload =
      '{"firmware":"v1.4.0","ip":"2001:db8::17","uptime_s":3600,"rssi":-61.6,"temp_c":41,"__proto__":{"firmware":"9.9.9"}}';
    expect(readHeartbeat(payload)).toEqual({
      ok: true,
      values: { ip: '2001:db8::17', uptime_s: 3600, rssi: -62 },
      refused: [{ field: 'firmware', reason: 'invalid_format', value: 'v1.4.0' }],
    });
  });

  it('reads `{}` as a sign of life with nothing to record', () => {
    expect(read({})).toEqual({ ok: true, values: {}, refused: [] });
  });

  it.each([
    ['not JSON', 'firmware=1.4.2', 'not_json'],
    ['an array', '[1,2]', 'not_object'],
    ['null', 'null', 'not_object'],
    ['a string', '"1.4.2"', 'not_object'],
    ['over the size limit', JSON.stringify({ firmware: '1.4.2', pad: 'x'.repeat(4200) }), 'too_large'],
  ])('does not read a payload that is %s', (_label, payload, reason) => {
    expect(readHeartbeat(Buffer.from(payload))).toEqual({ ok: false, reason });
  });

  it('reads a payload of exactly the size limit', () => {
    const base = JSON.stringify({ firmware: '1.4.2', pad: '' });
    const payload = JSON.stringify({ firmware: '1.4.2', pad: 'x'.repeat(MAX_DEVICE_PAYLOAD_BYTES - base.length) });
    expect(Buffer.byteLength(payload)).toBe(MAX_DEVICE_PAYLOAD_BYTES);
    expect(readHeartbeat(payload)).toMatchObject({ ok: true, values: { firmware: '1.4.2' } });
  });
});

/**
 * The reader's shortcut for plainly valid fields (acceptedAtOnce) never accepts what the
 * heartbeat's schema refuses, and gives the value the schema gives: the validation stays the
 * schema's, only faster.
 */
describe('the shortcut for plainly valid heartbeat fields', () => {
  const values: unknown[] = [
    '1.4.2',
    '1.4.2.7',
    '2.0.0-rc.1',
    '1.4.2+build.5',
    '1',
    '',
    'v1.4.0',
    '1.2.3.4.5',
    `1.${'2'.repeat(62)}`,
    `1.${'2'.repeat(63)}`,
    '1.4.2\n',
    ' 1.4.2',
    '10.0.4.17',
    '0.0.0.0',
    '255.255.255.255',
    '256.1.1.1',
    '10.0.4.300',
    '010.0.4.17',
    '10.0.4',
    '10.0.4.17 ',
    '2001:db8::17',
    '::ffff:10.0.4.17',
    'fe80::1%eth0',
    '::1\n',
    0,
    -0,
    1,
    3600,
    2_147_483_647,
    2_147_483_648,
    -1,
    1.5,
    -61,
    -61.6,
    -0.4,
    -150,
    -150.5,
    0.1,
    3,
    1e300,
    null,
    true,
    [],
    {},
    ['1.4.2'],
  ];
  it.each(HEARTBEAT_FIELDS.flatMap((field) => values.map((value) => [field, value] as const)))(
    '%s = %j: the schema agrees',
    (field, value) => {
      const fast = acceptedAtOnce(field, value);
      const parsed = Heartbeat.shape[field].safeParse(value);
      if (fast !== undefined) expect(parsed).toEqual({ success: true, data: fast });
    },
  );

  it('takes the common heartbeat without the schema', () => {
    expect(acceptedAtOnce('firmware', '1.4.2')).toBe('1.4.2');
    expect(acceptedAtOnce('ip', '10.0.4.17')).toBe('10.0.4.17');
    expect(acceptedAtOnce('uptime_s', 3600)).toBe(3600);
    expect(acceptedAtOnce('rssi', -61.6)).toBe(-62);
  });
});
