import { describe, expect, it } from 'vitest';
import { grantLock, holdOf } from '#core/deployments/update-locks';
import { selectForDispatch } from '#core/deployments/dispatch-rules';

const now = new Date('2026-06-01T12:00:00Z');
const at = (ms: number) => new Date(now.getTime() + ms);
const H = 3600_000;

describe('grantLock', () => {
  it('counts the lock from receipt and cuts it to 24 h, keeping what was asked', () => {
    const { state, capped } = grantLock({
      now,
      message: { for_s: 3 * 86_400, reason: 'recharging' },
      emergency: false,
      previousDurationTestAt: null,
    });
    expect(capped).toBe(true);
    expect(state).toMatchObject({ until: at(24 * H), requestedUntil: at(72 * H), reason: 'recharging', setAt: now });
  });

  it('an emergency fixture stays locked 24 h after its duration test, a release and a shorter lock included', () => {
    const test = grantLock({
      now,
      message: { for_s: 60, reason: 'emergency_test', duration_test_ended_s_ago: 3600 },
      emergency: true,
      previousDurationTestAt: null,
    }).state;
    expect(test).toMatchObject({ until: at(23 * H), reason: 'emergency_test', durationTestAt: at(-H) });
    const released = grantLock({
      now: at(H),
      message: { release: true },
      emergency: true,
      previousDurationTestAt: test.durationTestAt,
    }).state;
    expect(released).toMatchObject({ until: at(23 * H), reason: 'emergency_test' });
    const longer = grantLock({
      now: at(H),
      message: { for_s: 24 * 3600, reason: 'occupied' },
      emergency: true,
      previousDurationTestAt: test.durationTestAt,
    }).state;
    expect(longer).toMatchObject({ until: at(25 * H), reason: 'occupied' });
    const after = grantLock({
      now: at(23 * H),
      message: { release: true },
      emergency: true,
      previousDurationTestAt: test.durationTestAt,
    }).state;
    expect(after).toMatchObject({ until: null, reason: null });
  });

  it('an ordinary fixture records the test and gets only what it asks', () => {
    const { state } = grantLock({
      now,
      message: { for_s: 60, reason: 'emergency_test', duration_test_ended_s_ago: 0 },
      emergency: false,
      previousDurationTestAt: null,
    });
    expect(state).toMatchObject({ until: at(60_000), durationTestAt: now });
  });
});

describe('holdOf', () => {
  const none = { lockUntil: null, lockReason: null, siteTimeZone: null, siteFreezes: null };
  it('a lock holds until it ends; an ended one does not', () => {
    expect(holdOf({ ...none, lockUntil: at(1000), lockReason: 'occupied' }, now)).toEqual({
      reason: 'occupied',
      until: at(1000),
    });
    expect(holdOf({ ...none, lockUntil: now, lockReason: 'occupied' }, now)).toBeNull();
  });

  it("a site's freeze holds in its local time, and the later of lock and freeze is shown", () => {
    // Berlin is UTC+2 in June: 13:00-15:00 local is 11:00-13:00 UTC.
    const frozen = {
      ...none,
      siteTimeZone: 'Europe/Berlin',
      siteFreezes: [{ from: '2026-06-01T13:00', to: '2026-06-01T15:00' }],
    };
    expect(holdOf(frozen, now)).toEqual({ reason: 'site_frozen', until: at(H) });
    expect(holdOf(frozen, at(H))).toBeNull();
    expect(holdOf({ ...frozen, lockUntil: at(2 * H), lockReason: 'recharging' }, now)).toEqual({
      reason: 'recharging',
      until: at(2 * H),
    });
  });

  it('the dispatch leaves a held update queued', () => {
    const base = { firmwareKey: 'k1', targetVersion: '2.0.0', storageKey: 'x', desiredConfig: null, tags: null };
    const held = { ...base, hold: { ...none, lockUntil: at(1000), lockReason: 'other' } };
    const free = { ...base, hold: { ...none, lockUntil: at(-1000), lockReason: 'other' } };
    const selection = selectForDispatch([held, free], { now, respectMaintenanceWindow: false });
    expect(selection.send).toEqual([free]);
  });
});
