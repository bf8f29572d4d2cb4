import { describe, it, expect } from 'vitest';
import { isValidSerial } from '#core/devices/device-types';

describe('device serial', () => {
  it.each(['A', 'SN-0001', 'lx200.batch_7:unit-3', 'abcXYZ019', '-', '.', 'x'.repeat(64)])('accepts %j', (serial) => {
    expect(isValidSerial(serial)).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['65 characters', 'x'.repeat(65)],
    ['a space', 'SN 1'],
    ['a slash (MQTT topic level)', 'SN/1'],
    ['an MQTT wildcard', 'SN+'],
    ['a hash', 'SN#'],
    ['non-ASCII', 'SNé'],
    ['a newline', 'SN-1\n'],
    ['a number', 1234],
    ['null', null],
    ['undefined', undefined],
  ])('refuses %s', (_, value) => {
    expect(isValidSerial(value)).toBe(false);
  });
});
