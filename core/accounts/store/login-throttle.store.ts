import { addressWindow, emailWindow, LOGIN_LIMITS } from '../login-throttle-rules';
import type { Db } from '../../db/db';

/** An (e-mail, client address) pair the throttle counts. */
export interface ThrottleKey {
  email: string;
  address: string;
}

/**
 * Counts an attempt of `email` from `address` unless that address is locked out of it: one
 * statement that also decides (decideAddressAttempt is the rule it implements). Null when
 * refused; otherwise when the e-mail last logged in from there.
 */
export async function countAddressAttempt(
  db: Db,
  input: ThrottleKey & { now: Date },
): Promise<{ lastSuccessAt: Date | null } | null> {
  const { email, address, now } = input;
  const { opensAfter: windowOpen, lockoutEnds } = addressWindow(now);
  const counted = await db.raw<{ rows: Array<{ last_success_at: Date | null }> }>(
    `INSERT INTO login_address_throttle AS t (email, address, failures, window_started_at) VALUES (?, ?, 1, ?)
       ON CONFLICT (email, address) DO UPDATE SET
         failures = CASE WHEN t.locked_until IS NULL AND t.window_started_at > ? THEN t.failures + 1 ELSE 1 END,
         window_started_at = CASE WHEN t.locked_until IS NULL AND t.window_started_at > ? THEN t.window_started_at ELSE EXCLUDED.window_started_at END,
         locked_until = CASE WHEN t.locked_until IS NULL AND t.window_started_at > ? AND t.failures + 1 >= ? THEN CAST(? AS timestamptz) END
       WHERE t.locked_until IS NULL OR t.locked_until <= EXCLUDED.window_started_at
       RETURNING t.last_success_at`,
    [email, address, now, windowOpen, windowOpen, windowOpen, LOGIN_LIMITS.addressFailures, lockoutEnds],
  );
  const row = counted.rows[0];
  return row ? { lastSuccessAt: row.last_success_at ? new Date(row.last_success_at) : null } : null;
}

/**
 * Counts a failure-to-be of `email` unless its backoff runs: one statement that also decides
 * (decideEmailAttempt is the rule it implements). False when refused.
 */
export async function countEmailAttempt(db: Db, input: { email: string; now: Date }): Promise<boolean> {
  const { email, now } = input;
  const emailWindowOpen = emailWindow(now).opensAfter;
  const free = LOGIN_LIMITS.emailFreeFailures;
  const emailCounted = await db.raw<{ rows: Array<{ failures: number }> }>(
    `INSERT INTO login_throttle AS t (email, failures, window_started_at) VALUES (?, 1, ?)
       ON CONFLICT (email) DO UPDATE SET
         failures = CASE WHEN t.window_started_at > ? THEN t.failures + 1 ELSE 1 END,
         window_started_at = CASE WHEN t.window_started_at > ? THEN t.window_started_at ELSE EXCLUDED.window_started_at END,
         locked_until = CASE WHEN t.window_started_at > ? AND t.failures + 1 >= ?
           THEN EXCLUDED.window_started_at + LEAST(POWER(2, t.failures + 1 - ?), ?) * INTERVAL '1 second' END
       WHERE t.locked_until IS NULL OR t.locked_until <= EXCLUDED.window_started_at
       RETURNING t.failures`,
    [email, now, emailWindowOpen, emailWindowOpen, emailWindowOpen, free, free, LOGIN_LIMITS.emailBackoffMaxS],
  );
  return emailCounted.rows.length > 0;
}

/** Takes back an attempt counted for the address (withdrawAddressAttempt is the rule). */
export async function withdrawAddressAttempt(db: Db, key: ThrottleKey): Promise<void> {
  await db.raw(
    `UPDATE login_address_throttle SET failures = failures - 1, locked_until = CASE WHEN failures - 1 >= ? THEN locked_until END
         WHERE email = ? AND address = ? AND failures > 0`,
    [LOGIN_LIMITS.addressFailures, key.email, key.address],
  );
}

/** The end of the lockout of an address (for Retry-After); null when none is recorded. */
export async function addressLockedUntil(db: Db, key: ThrottleKey): Promise<Date | null> {
  const row = await db('login_address_throttle')
    .where({ email: key.email, address: key.address })
    .first<{ locked_until: Date | null } | undefined>('locked_until');
  return row?.locked_until ? new Date(row.locked_until) : null;
}

/** The end of the per-e-mail backoff (for Retry-After); null when none is recorded. */
export async function emailLockedUntil(db: Db, email: string): Promise<Date | null> {
  const row = await db('login_throttle')
    .where({ email })
    .first<{ locked_until: Date | null } | undefined>('locked_until');
  return row?.locked_until ? new Date(row.locked_until) : null;
}

/** A right password from the address: its counter starts again and the address is known from `now`. */
export async function recordAddressSuccess(db: Db, input: ThrottleKey & { now: Date }): Promise<void> {
  await db('login_address_throttle')
    .where({ email: input.email, address: input.address })
    .update({ failures: 0, locked_until: null, window_started_at: input.now, last_success_at: input.now });
}

/** A right password: the attempt counted for the e-mail was no failure. */
export async function withdrawEmailFailure(db: Db, email: string): Promise<void> {
  await db('login_throttle').where({ email }).where('failures', '>', 0).decrement('failures', 1);
}
