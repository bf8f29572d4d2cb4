import { isIPv4, isIPv6 } from 'node:net';

const MINUTE_MS = 60_000;
const DAY_MS = 24 * 60 * MINUTE_MS;

/** The limits of the login throttle (README "Login throttling"). */
export const LOGIN_LIMITS = {
  /** Attempts per e-mail and address within `addressWindowMs`; the last of them locks that address out. */
  addressFailures: 10,
  addressWindowMs: 15 * MINUTE_MS,
  addressLockoutMs: 15 * MINUTE_MS,
  /** Failures per e-mail within `emailWindowMs` (from addresses it is not known at) before the backoff starts. */
  emailFreeFailures: 20,
  emailWindowMs: DAY_MS,
  /** The backoff starts at 1 s and doubles with each further failure, up to this many seconds. */
  emailBackoffMaxS: 300,
  /** An address the e-mail logged in from within this long is known: the per-e-mail backoff spares it. */
  knownAddressMs: 30 * DAY_MS,
} as const;

/**
 * One throttle counter (a row of login_address_throttle or login_throttle). The decisions below
 * are what the counting statements in store/login-throttle.store.ts do in one atomic step, so
 * parallel guesses cannot all pass a check made before any of them was counted; the store's
 * test runs these same tables through the statements.
 */
export interface ThrottleCounter {
  failures: number;
  windowStartedAt: Date;
  lockedUntil: Date | null;
}

export type AttemptDecision = { admitted: true; next: ThrottleCounter } | { admitted: false };

/** The window bounds the per-address statement is given for an attempt at `now`. */
export function addressWindow(now: Date): { opensAfter: Date; lockoutEnds: Date } {
  return {
    opensAfter: new Date(now.getTime() - LOGIN_LIMITS.addressWindowMs),
    lockoutEnds: new Date(now.getTime() + LOGIN_LIMITS.addressLockoutMs),
  };
}

/** The window bound the per-e-mail statement is given for an attempt at `now`. */
export function emailWindow(now: Date): { opensAfter: Date } {
  return { opensAfter: new Date(now.getTime() - LOGIN_LIMITS.emailWindowMs) };
}

const lockedAt = (counter: ThrottleCounter, now: Date): boolean =>
  counter.lockedUntil !== null && counter.lockedUntil.getTime() > now.getTime();
const fresh = (now: Date): ThrottleCounter => ({ failures: 1, windowStartedAt: now, lockedUntil: null });

/**
 * Per e-mail and address: refused while locked out; otherwise counted, in the running window
 * (a window ends with a lockout too) or in a new one; the attempt that makes
 * `addressFailures` is still checked and starts the lockout.
 */
export function decideAddressAttempt(current: ThrottleCounter | null, now: Date): AttemptDecision {
  if (!current) return { admitted: true, next: fresh(now) };
  if (lockedAt(current, now)) return { admitted: false };
  const { opensAfter, lockoutEnds } = addressWindow(now);
  const inWindow = current.lockedUntil === null && current.windowStartedAt.getTime() > opensAfter.getTime();
  if (!inWindow) return { admitted: true, next: fresh(now) };
  const failures = current.failures + 1;
  return {
    admitted: true,
    next: {
      failures,
      windowStartedAt: current.windowStartedAt,
      lockedUntil: failures >= LOGIN_LIMITS.addressFailures ? lockoutEnds : null,
    },
  };
}

/**
 * An attempt counted for its address but then refused by the per-e-mail backoff was no attempt
 * from that address: the owner waiting at a new address must not use up that address's own
 * allowance meanwhile. Null when there is nothing to take back.
 */
export function withdrawAddressAttempt(current: ThrottleCounter): ThrottleCounter | null {
  if (current.failures <= 0) return null;
  const failures = current.failures - 1;
  return {
    failures,
    windowStartedAt: current.windowStartedAt,
    lockedUntil: failures >= LOGIN_LIMITS.addressFailures ? current.lockedUntil : null,
  };
}

/** Seconds the per-e-mail backoff holds after the `failures`-th failure in the window (>= emailFreeFailures). */
export function emailBackoffSeconds(failures: number): number {
  return Math.min(2 ** (failures - LOGIN_LIMITS.emailFreeFailures), LOGIN_LIMITS.emailBackoffMaxS);
}

/**
 * Per e-mail, from addresses it is not known at: refused while the backoff runs; otherwise
 * counted, and from the `emailFreeFailures`-th failure in the window each one starts a backoff
 * of 1 s, doubling up to `emailBackoffMaxS`.
 */
export function decideEmailAttempt(current: ThrottleCounter | null, now: Date): AttemptDecision {
  if (!current) return { admitted: true, next: fresh(now) };
  if (lockedAt(current, now)) return { admitted: false };
  const inWindow = current.windowStartedAt.getTime() > emailWindow(now).opensAfter.getTime();
  if (!inWindow) return { admitted: true, next: fresh(now) };
  const failures = current.failures + 1;
  const backoff =
    failures >= LOGIN_LIMITS.emailFreeFailures ? new Date(now.getTime() + emailBackoffSeconds(failures) * 1000) : null;
  return { admitted: true, next: { failures, windowStartedAt: current.windowStartedAt, lockedUntil: backoff } };
}

/** Known addresses (a login from there within `knownAddressMs`) are spared the per-e-mail backoff. */
export function isKnownAddress(lastSuccessAt: Date | null, now: Date): boolean {
  const lastSuccess = lastSuccessAt ? lastSuccessAt.getTime() : 0;
  return now.getTime() - lastSuccess < LOGIN_LIMITS.knownAddressMs;
}

/** Retry-After of a refusal: the rest of the lockout, at least one second. */
export function retryAfterSeconds(lockedUntil: Date | null, now: Date): number {
  const until = lockedUntil ? lockedUntil.getTime() : now.getTime();
  return Math.max(1, Math.ceil((until - now.getTime()) / 1000));
}

/**
 * What the throttle counts as one client: an IPv4 address, or the /64 prefix of an IPv6 one
 * (one subscriber usually holds a whole /64, so single addresses would be free for the taking).
 */
export function throttleAddress(ip: string | undefined): string {
  if (!ip) return 'unknown';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (isIPv4(ip)) return ip;
  const bare = ip.split('%')[0]!;
  if (!isIPv6(bare)) return ip.slice(0, 100);
  const [head = '', tail] = bare.split('::');
  const groupsOf = (part: string) =>
    part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const front = groupsOf(head);
  const back = tail === undefined ? [] : groupsOf(tail);
  const groups = [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
