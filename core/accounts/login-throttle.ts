import type { Knex } from 'knex';
import { DomainError } from '../shared/errors';
import { isKnownAddress, retryAfterSeconds, throttleAddress } from './login-throttle-rules';
import * as throttles from './store/login-throttle.store';

export { LOGIN_LIMITS, throttleAddress } from './login-throttle-rules';

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
 * The rules are in login-throttle-rules.ts.
 */
export class LoginThrottle {
  constructor(private readonly knex: Knex) {}

  /** Counts the attempt, or refuses it with `too_many_login_attempts` (429, Retry-After). */
  async admit(input: { email: string; clientAddress: string | undefined; now: Date }): Promise<AdmittedLogin> {
    const { email, now } = input;
    const key = { email, address: throttleAddress(input.clientAddress) };
    const counted = await throttles.countAddressAttempt(this.knex, { ...key, now });
    if (!counted) throw refusal(await throttles.addressLockedUntil(this.knex, key), now);
    if (isKnownAddress(counted.lastSuccessAt, now)) return { ...key, countedForEmail: false };

    if (!(await throttles.countEmailAttempt(this.knex, { email, now }))) {
      // Not let through, so not an attempt from this address: the owner waiting at a new
      // address must not use up that address's own allowance meanwhile.
      await throttles.withdrawAddressAttempt(this.knex, key);
      throw refusal(await throttles.emailLockedUntil(this.knex, email), now);
    }
    return { ...key, countedForEmail: true };
  }

  /** The password was right: the attempt was no failure, and the address is known from now on. */
  async succeeded(attempt: AdmittedLogin, now: Date): Promise<void> {
    await throttles.recordAddressSuccess(this.knex, { email: attempt.email, address: attempt.address, now });
    if (attempt.countedForEmail) await throttles.withdrawEmailFailure(this.knex, attempt.email);
  }
}

const refusal = (lockedUntil: Date | null, now: Date): DomainError =>
  new DomainError('too_many_login_attempts', 'Too many failed logins; try again later.', {
    retryAfterSeconds: retryAfterSeconds(lockedUntil, now),
  });
