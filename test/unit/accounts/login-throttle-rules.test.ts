import { describe, it, expect } from 'vitest';
import {
  LOGIN_LIMITS,
  decideAddressAttempt,
  decideEmailAttempt,
  emailBackoffSeconds,
  isKnownAddress,
  retryAfterSeconds,
  throttleAddress,
  withdrawAddressAttempt,
  type ThrottleCounter,
} from '#core/accounts/login-throttle-rules';
import { ADDRESS_CASES, DAY, EMAIL_CASES, MIN, at, counter, now } from './login-throttle-cases';

describe('login throttle rules', () => {
  describe('per e-mail and address', () => {
    it.each(ADDRESS_CASES)('%s', (_, current, expected) => {
      expect(decideAddressAttempt(current, now)).toEqual(expected);
    });

    it('lets exactly addressFailures attempts through in a row, then refuses', () => {
      let state: ThrottleCounter | null = null;
      const admitted: boolean[] = [];
      for (let i = 0; i < 12; i++) {
        const decision = decideAddressAttempt(state, now);
        admitted.push(decision.admitted);
        if (decision.admitted) state = decision.next;
      }
      expect(admitted.filter(Boolean)).toHaveLength(LOGIN_LIMITS.addressFailures);
      expect(admitted.slice(LOGIN_LIMITS.addressFailures)).toEqual([false, false]);
    });

    const withdrawals: Array<[string, ThrottleCounter, ThrottleCounter | null]> = [
      ['nothing counted: nothing to take back', counter(0, now), null],
      ['one attempt fewer', counter(4, now), counter(3, now)],
      ['the attempt that locked is taken back with its lockout', counter(10, now, at(15 * MIN)), counter(9, now)],
      ['a lockout made by more attempts stays', counter(11, now, at(15 * MIN)), counter(10, now, at(15 * MIN))],
    ];
    it.each(withdrawals)('withdrawing an attempt: %s', (_, current, expected) => {
      expect(withdrawAddressAttempt(current)).toEqual(expected);
    });
  });

  describe('per e-mail, at addresses it is not known at', () => {
    it.each(EMAIL_CASES)('%s', (_, current, expected) => {
      expect(decideEmailAttempt(current, now)).toEqual(expected);
    });

    it.each([
      [20, 1],
      [21, 2],
      [22, 4],
      [28, 256],
      [29, 300],
      [1000, 300],
    ])('the %ith failure backs off %i s', (failures, seconds) => {
      expect(emailBackoffSeconds(failures)).toBe(seconds);
    });
  });

  it.each([
    ['never logged in from there', null, false],
    ['logged in from there a minute ago', at(-MIN), true],
    ['logged in from there 29 days ago', at(-29 * DAY), true],
    ['logged in from there 30 days ago', at(-30 * DAY), false],
  ] as const)('known address: %s', (_, lastSuccessAt, known) => {
    expect(isKnownAddress(lastSuccessAt, now)).toBe(known);
  });

  it.each([
    ['a lockout of 15 minutes', at(15 * MIN), 900],
    ['a part second rounds up', at(1500), 2],
    ['a lockout ending now still asks for a second', now, 1],
    ['no lockout recorded (a race with its end) asks for a second', null, 1],
  ] as const)('Retry-After: %s', (_, lockedUntil, seconds) => {
    expect(retryAfterSeconds(lockedUntil, now)).toBe(seconds);
  });

  it.each([
    [undefined, 'unknown'],
    ['203.0.113.9', '203.0.113.9'],
    ['::ffff:203.0.113.9', '203.0.113.9'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002::1', '2001:db8:1:2::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['not an address', 'not an address'],
  ] as const)('counts %s as the client %s', (ip, expected) => {
    expect(throttleAddress(ip)).toBe(expected);
  });
});
