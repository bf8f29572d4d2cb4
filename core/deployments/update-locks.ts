import {
  EMERGENCY_RECHARGE_S,
  MAX_UPDATE_LOCK_S,
  type UpdateLockReason,
  type UpdateLockRequest,
} from '#protocol/lock-payloads';
import { activeFreeze, freezeEdgeInstant, type SiteFreeze } from '../sites/site-schedule';

/**
 * Update locks and site freezes (docs/ota.md "Update locks"): why a queued update is `held`.
 * Pure rules; the dispatch skips a held update (it stays queued, with no deadline, so it never
 * times out nor counts as a failure) and the views show it held with its reason and end.
 */

/** Why an update is held: the device's own lock reason, or its site's freeze. */
export const HOLD_REASONS = ['emergency_test', 'recharging', 'occupied', 'other', 'site_frozen'] as const;
export type HoldReason = (typeof HOLD_REASONS)[number];

/** A held update: why, and when the hold ends (null: a freeze whose end cannot be read). */
export interface Hold {
  reason: HoldReason;
  until: Date | null;
}

/** What decides whether a device's queued update is held now. */
export interface HoldInputs {
  lockUntil: Date | null;
  lockReason: string | null;
  siteTimeZone: string | null;
  siteFreezes: readonly SiteFreeze[] | null;
}

const isLockReason = (v: string | null): v is UpdateLockReason =>
  v === 'emergency_test' || v === 'recharging' || v === 'occupied' || v === 'other';

/**
 * The hold on a device's queued update at `now`, or null. A device lock and a site freeze may
 * both apply: the one that ends later is shown (the update waits for both).
 */
export function holdOf(h: HoldInputs, now: Date): Hold | null {
  const lock: Hold | null =
    h.lockUntil !== null && h.lockUntil.getTime() > now.getTime()
      ? { reason: isLockReason(h.lockReason) ? h.lockReason : 'other', until: h.lockUntil }
      : null;
  const freeze = h.siteTimeZone && h.siteFreezes?.length ? activeFreeze(h.siteFreezes, h.siteTimeZone, now) : null;
  const frozen: Hold | null = freeze
    ? { reason: 'site_frozen', until: freezeEdgeInstant(freeze.to, h.siteTimeZone!) }
    : null;
  if (!lock) return frozen;
  if (!frozen) return lock;
  return frozen.until === null || frozen.until.getTime() > lock.until!.getTime() ? frozen : lock;
}

/** A device's lock as stored (device_update_locks). */
export interface LockState {
  until: Date | null;
  reason: UpdateLockReason | null;
  requestedUntil: Date | null;
  setAt: Date | null;
  durationTestAt: Date | null;
}

/**
 * The lock a device's message grants at `now`:
 * - a lock lasts `for_s` from receipt, cut to MAX_UPDATE_LOCK_S (`capped`);
 * - a duration test reported (`duration_test_ended_s_ago`) is recorded whatever the fixture;
 * - an emergency-lighting fixture whose last duration test ended less than 24 h ago stays
 *   locked until 24 h after it (EN 62034 recharge), whatever the message asks, a release
 *   included: then the reason is `emergency_test`.
 */
export function grantLock(input: {
  now: Date;
  message: UpdateLockRequest | { release: true };
  emergency: boolean;
  previousDurationTestAt: Date | null;
}): { state: LockState; capped: boolean } {
  const { now, message } = input;
  const t = now.getTime();
  const durationTestAt =
    'release' in message || message.duration_test_ended_s_ago === undefined
      ? input.previousDurationTestAt
      : new Date(t - message.duration_test_ended_s_ago * 1000);
  let until: Date | null = null;
  let reason: UpdateLockReason | null = null;
  let requestedUntil: Date | null = null;
  let capped = false;
  if (!('release' in message)) {
    requestedUntil = new Date(t + message.for_s * 1000);
    capped = message.for_s > MAX_UPDATE_LOCK_S;
    until = new Date(t + Math.min(message.for_s, MAX_UPDATE_LOCK_S) * 1000);
    reason = message.reason;
  }
  const recharged = durationTestAt ? durationTestAt.getTime() + EMERGENCY_RECHARGE_S * 1000 : null;
  if (input.emergency && recharged !== null && recharged > t && (until === null || recharged > until.getTime())) {
    until = new Date(recharged);
    reason = 'emergency_test';
  }
  return { state: { until, reason, requestedUntil, setAt: now, durationTestAt }, capped };
}
