import { describe, expect, it } from 'vitest';
import { DEVICE_RECONNECT_POLICY, ReconnectBackoff, scaledReconnectPolicy } from '#simulator/reconnect-backoff';

/** A random source that always answers `value` (0 = shortest wait, just below 1 = longest). */
const fixed = (value: number) => () => value;

describe('the reference device reconnects as docs/device-protocol.md says', () => {
  it('after losing a connection it comes back within 1 to 20 s, spread at random', () => {
    expect(new ReconnectBackoff(DEVICE_RECONNECT_POLICY, fixed(0)).next({ kind: 'lost', upForS: 600 })).toBe(1000);
    expect(new ReconnectBackoff(DEVICE_RECONNECT_POLICY, fixed(0.5)).next({ kind: 'lost', upForS: 600 })).toBe(10_500);
    expect(
      new ReconnectBackoff(DEVICE_RECONNECT_POLICY, fixed(0.9999)).next({ kind: 'lost', upForS: 600 }),
    ).toBeLessThanOrEqual(20_000);
  });

  it('spreads 100,000 devices that lost the service at once over the whole window', () => {
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const perSecond = new Array<number>(21).fill(0);
    for (let i = 0; i < 100_000; i++) {
      const ms = new ReconnectBackoff(DEVICE_RECONNECT_POLICY, random).next({ kind: 'lost', upForS: 600 });
      perSecond[Math.floor(ms / 1000)]! += 1;
    }
    // About 5,300 a second from the 1st to the 20th second, none in the first.
    expect(perSecond[0]).toBe(0);
    expect(Math.max(...perSecond)).toBeLessThan(6_000);
  });

  // [n-th failure in a row, CONNACK code or none, longest wait in s]
  it.each([
    [1, undefined, 5],
    [2, undefined, 10],
    [3, 3, 20],
    [7, 3, 300],
    [20, undefined, 300],
    [1, 4, 60],
    [2, 5, 120],
    [6, 4, 1920],
    [7, 5, 3600],
    [30, 2, 3600],
  ])('failure %i with CONNACK %s waits at most %i s, at least 1 s', (failures, code, longestS) => {
    const longest = new ReconnectBackoff(DEVICE_RECONNECT_POLICY, fixed(0.999_999));
    const shortest = new ReconnectBackoff(DEVICE_RECONNECT_POLICY, fixed(0));
    let high = 0;
    let low = 0;
    for (let i = 0; i < failures; i++) {
      high = longest.next({ kind: 'failed', connackCode: code });
      low = shortest.next({ kind: 'failed', connackCode: code });
    }
    expect(Math.round(high / 1000)).toBe(longestS);
    expect(low).toBe(1000);
  });

  it('starts counting again only after a connection that stayed up a minute', () => {
    const backoff = new ReconnectBackoff(DEVICE_RECONNECT_POLICY, fixed(0.999_999));
    for (let i = 0; i < 5; i++) backoff.next({ kind: 'failed', connackCode: undefined });
    // Accepted, then closed after 2 s (a flood close, a takeover loop): the count goes on.
    backoff.next({ kind: 'lost', upForS: 2 });
    expect(Math.round(backoff.next({ kind: 'failed', connackCode: undefined }) / 1000)).toBe(160);
    backoff.next({ kind: 'lost', upForS: 60 });
    expect(Math.round(backoff.next({ kind: 'failed', connackCode: undefined }) / 1000)).toBe(5);
  });

  it('scales every wait for tests that restart a service in a second', () => {
    const quick = scaledReconnectPolicy(0.25);
    expect(quick.afterLossS).toEqual({ min: 0.25, max: 5 });
    expect(quick.unavailable).toEqual({ baseS: 1.25, capS: 75 });
    expect(quick.stableAfterS).toBe(15);
  });
});
