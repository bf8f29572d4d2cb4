import type { AttemptDecision, ThrottleCounter } from '#core/accounts/login-throttle-rules';

/**
 * Throttle counters before an attempt at `now` and the decision on it: the unit tests check the
 * rules with them, the store test runs them through the counting statements.
 */
export const now = new Date('2026-11-25T08:00:00Z');
export const at = (offsetMs: number): Date => new Date(now.getTime() + offsetMs);
export const MIN = 60_000;
export const DAY = 24 * 60 * MIN;
export const counter = (failures: number, windowStartedAt: Date, lockedUntil: Date | null = null): ThrottleCounter => ({
  failures,
  windowStartedAt,
  lockedUntil,
});

export type ThrottleCase = [name: string, current: ThrottleCounter | null, decision: AttemptDecision];

export const ADDRESS_CASES: ThrottleCase[] = [
  ['a first attempt opens a window', null, { admitted: true, next: counter(1, now) }],
  ['an attempt in the window is counted', counter(3, at(-5 * MIN)), { admitted: true, next: counter(4, at(-5 * MIN)) }],
  ['the 9th attempt does not lock', counter(8, at(-MIN)), { admitted: true, next: counter(9, at(-MIN)) }],
  [
    'the 10th attempt is checked and starts a 15-minute lockout',
    counter(9, at(-MIN)),
    { admitted: true, next: counter(10, at(-MIN), at(15 * MIN)) },
  ],
  ['an attempt during the lockout is refused', counter(10, at(-MIN), at(14 * MIN)), { admitted: false }],
  ['the lockout ends at its last millisecond', counter(10, at(-MIN), at(1)), { admitted: false }],
  ['after the lockout a new window opens', counter(10, at(-16 * MIN), now), { admitted: true, next: counter(1, now) }],
  ['a window 15 minutes old is over', counter(9, at(-15 * MIN)), { admitted: true, next: counter(1, now) }],
  [
    'a window just under 15 minutes old still runs',
    counter(9, at(-15 * MIN + 1)),
    { admitted: true, next: counter(10, at(-15 * MIN + 1), at(15 * MIN)) },
  ],
  [
    'after a success (0 failures) counting starts again',
    counter(0, at(-MIN)),
    { admitted: true, next: counter(1, at(-MIN)) },
  ],
];

export const EMAIL_CASES: ThrottleCase[] = [
  ['a first failure opens a 24-hour window', null, { admitted: true, next: counter(1, now) }],
  [
    'failures below the free allowance wait for nothing',
    counter(18, at(-DAY / 2)),
    { admitted: true, next: counter(19, at(-DAY / 2)) },
  ],
  [
    'the 20th failure starts a 1 s backoff',
    counter(19, at(-DAY / 2)),
    { admitted: true, next: counter(20, at(-DAY / 2), at(1000)) },
  ],
  [
    'the 21st doubles it',
    counter(20, at(-DAY / 2), at(-1)),
    { admitted: true, next: counter(21, at(-DAY / 2), at(2000)) },
  ],
  [
    'the 25th waits 32 s',
    counter(24, at(-DAY / 2), now),
    { admitted: true, next: counter(25, at(-DAY / 2), at(32_000)) },
  ],
  [
    'the backoff stops doubling at 5 minutes',
    counter(40, at(-DAY / 2)),
    { admitted: true, next: counter(41, at(-DAY / 2), at(300_000)) },
  ],
  ['an attempt during the backoff is refused', counter(21, at(-DAY / 2), at(1)), { admitted: false }],
  ['a window 24 hours old is over', counter(30, at(-DAY)), { admitted: true, next: counter(1, now) }],
  [
    'a backoff over and a window over: a new window',
    counter(30, at(-2 * DAY), at(-DAY)),
    { admitted: true, next: counter(1, now) },
  ],
];
