import { isIPv4, isIPv6 } from 'node:net';
import type { Knex } from 'knex';
import { DomainError } from '../shared/errors';

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

/** An attempt that was let through (and counted): what to undo when it succeeds. */
export interface AdmittedLogin {
  email: string;
  address: string;
  /** Counted against the e-mail too (the address is not known for it). */
  countedForEmail: boolean;
}

/**
 * OWASP API2 without handing attackers a lockout of anyone they like. Two counters, each
 * incremented by one statement that also decides, before the password is checked: so parallel
 * guesses cannot all pass a check made before any of them was counted.
 * - per e-mail and client address: 10 attempts in 15 minutes lock that address out of that
 *   e-mail for 15 minutes; a successful login resets it and marks the address known;
 * - per e-mail, for addresses it is not known at: from the 20th failure in 24 hours each attempt
 *   waits 1 s, doubling to 5 minutes. This bounds guessing spread over many addresses, and it
 *   never applies where the owner has logged in before, so nobody elsewhere can keep them out.
 */
export class LoginThrottle {
  constructor(private readonly knex: Knex) {}

  /** Counts the attempt, or refuses it with `too_many_login_attempts` (429, Retry-After). */
  async admit(input: { email: string; clientAddress: string | undefined; now: Date }): Promise<AdmittedLogin> {
    const { email, now } = input;
    const address = throttleAddress(input.clientAddress);
    const windowOpen = new Date(now.getTime() - LOGIN_LIMITS.addressWindowMs);
    const counted = (await this.knex.raw(
      `INSERT INTO login_address_throttle AS t (email, address, failures, window_started_at) VALUES (?, ?, 1, ?)
       ON CONFLICT (email, address) DO UPDATE SET
         failures = CASE WHEN t.locked_until IS NULL AND t.window_started_at > ? THEN t.failures + 1 ELSE 1 END,
         window_started_at = CASE WHEN t.locked_until IS NULL AND t.window_started_at > ? THEN t.window_started_at ELSE EXCLUDED.window_started_at END,
         locked_until = CASE WHEN t.locked_until IS NULL AND t.window_started_at > ? AND t.failures + 1 >= ? THEN CAST(? AS timestamptz) END
       WHERE t.locked_until IS NULL OR t.locked_until <= EXCLUDED.window_started_at
       RETURNING t.last_success_at`,
      [email, address, now, windowOpen, windowOpen, windowOpen, LOGIN_LIMITS.addressFailures, new Date(now.getTime() + LOGIN_LIMITS.addressLockoutMs)],
    )) as { rows: Array<{ last_success_at: Date | null }> };
    const row = counted.rows[0];
    if (!row) throw await this.refusal(this.knex('login_address_throttle').where({ email, address }), now);

    const lastSuccess = row.last_success_at ? new Date(row.last_success_at).getTime() : 0;
    if (now.getTime() - lastSuccess < LOGIN_LIMITS.knownAddressMs) return { email, address, countedForEmail: false };

    const emailWindowOpen = new Date(now.getTime() - LOGIN_LIMITS.emailWindowMs);
    const free = LOGIN_LIMITS.emailFreeFailures;
    const emailCounted = (await this.knex.raw(
      `INSERT INTO login_throttle AS t (email, failures, window_started_at) VALUES (?, 1, ?)
       ON CONFLICT (email) DO UPDATE SET
         failures = CASE WHEN t.window_started_at > ? THEN t.failures + 1 ELSE 1 END,
         window_started_at = CASE WHEN t.window_started_at > ? THEN t.window_started_at ELSE EXCLUDED.window_started_at END,
         locked_until = CASE WHEN t.window_started_at > ? AND t.failures + 1 >= ?
           THEN EXCLUDED.window_started_at + LEAST(POWER(2, t.failures + 1 - ?), ?) * INTERVAL '1 second' END
       WHERE t.locked_until IS NULL OR t.locked_until <= EXCLUDED.window_started_at
       RETURNING t.failures`,
      [email, now, emailWindowOpen, emailWindowOpen, emailWindowOpen, free, free, LOGIN_LIMITS.emailBackoffMaxS],
    )) as { rows: Array<{ failures: number }> };
    if (emailCounted.rows.length === 0) {
      // Not let through, so not an attempt from this address: the owner waiting at a new
      // address must not use up that address's own allowance meanwhile.
      await this.knex.raw(
        `UPDATE login_address_throttle SET failures = failures - 1, locked_until = CASE WHEN failures - 1 >= ? THEN locked_until END
         WHERE email = ? AND address = ? AND failures > 0`,
        [LOGIN_LIMITS.addressFailures, email, address],
      );
      throw await this.refusal(this.knex('login_throttle').where({ email }), now);
    }
    return { email, address, countedForEmail: true };
  }

  /** The password was right: the attempt was no failure, and the address is known from now on. */
  async succeeded(attempt: AdmittedLogin, now: Date): Promise<void> {
    await this.knex('login_address_throttle')
      .where({ email: attempt.email, address: attempt.address })
      .update({ failures: 0, locked_until: null, window_started_at: now, last_success_at: now });
    if (attempt.countedForEmail) {
      await this.knex('login_throttle').where({ email: attempt.email }).where('failures', '>', 0).decrement('failures', 1);
    }
  }

  private async refusal(lock: Knex.QueryBuilder, now: Date): Promise<DomainError> {
    const row = (await lock.first('locked_until')) as { locked_until: Date | null } | undefined;
    const until = row?.locked_until ? new Date(row.locked_until).getTime() : now.getTime();
    return new DomainError('too_many_login_attempts', 'Too many failed logins; try again later.', {
      retryAfterSeconds: Math.max(1, Math.ceil((until - now.getTime()) / 1000)),
    });
  }
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
  const groupsOf = (part: string) => (part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])));
  const front = groupsOf(head);
  const back = tail === undefined ? [] : groupsOf(tail);
  const groups = [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}
