import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { Knex } from 'knex';
import { openTestDatabase, type OpenTestDatabase } from '../helpers/test-database';
import type { Database } from '#core/db/database';
import {
  countAddressAttempt,
  countEmailAttempt,
  withdrawAddressAttempt,
} from '#core/accounts/store/login-throttle.store';
import { withdrawAddressAttempt as withdrawRule, type ThrottleCounter } from '#core/accounts/login-throttle-rules';
import { ADDRESS_CASES, EMAIL_CASES, MIN, at, counter, now } from '../unit/accounts/login-throttle-cases';
import { ifStarted } from '../helpers/teardown';

/**
 * The counting statements decide in SQL (atomically, so parallel guesses cannot all pass);
 * login-throttle-rules.ts states the same decisions in code. This runs the rules' tables
 * through the statements, so the two cannot drift apart. A database, no server.
 */
describe('login throttle store: the statements decide as the rules do', () => {
  let opened: OpenTestDatabase;
  let database: Database;
  let knex: Knex;

  beforeAll(async () => {
    opened = await openTestDatabase();
    database = opened.database;
    knex = database.knex;
  });
  afterAll(async () => {
    await ifStarted(opened)?.close();
  });

  let n = 0;
  const email = () => `case-${++n}@example.com`;
  const address = '203.0.113.9';
  const asCounter = (
    row: { failures: number; window_started_at: Date; locked_until: Date | null } | undefined,
  ): ThrottleCounter | null =>
    row
      ? counter(row.failures, new Date(row.window_started_at), row.locked_until ? new Date(row.locked_until) : null)
      : null;
  const stored = (c: ThrottleCounter) => ({
    failures: c.failures,
    window_started_at: c.windowStartedAt,
    locked_until: c.lockedUntil,
  });
  const addressRow = async (e: string) =>
    asCounter(await knex('login_address_throttle').where({ email: e, address }).first());
  const emailRow = async (e: string) => asCounter(await knex('login_throttle').where({ email: e }).first());

  it.each(ADDRESS_CASES)('per address: %s', async (_, current, decision) => {
    const e = email();
    if (current) await knex('login_address_throttle').insert({ email: e, address, ...stored(current) });
    const counted = await countAddressAttempt(knex, { email: e, address, now });
    expect(counted !== null).toBe(decision.admitted);
    expect(await addressRow(e)).toEqual(decision.admitted ? decision.next : current);
  });

  it.each(EMAIL_CASES)('per e-mail: %s', async (_, current, decision) => {
    const e = email();
    if (current) await knex('login_throttle').insert({ email: e, ...stored(current) });
    expect(await countEmailAttempt(knex, { email: e, now })).toBe(decision.admitted);
    expect(await emailRow(e)).toEqual(decision.admitted ? decision.next : current);
  });

  it.each([counter(0, now), counter(4, now), counter(10, now, at(15 * MIN)), counter(11, now, at(15 * MIN))])(
    'withdrawing an attempt from %o',
    async (current) => {
      const e = email();
      await knex('login_address_throttle').insert({ email: e, address, ...stored(current) });
      await withdrawAddressAttempt(knex, { email: e, address });
      expect(await addressRow(e)).toEqual(withdrawRule(current) ?? current);
    },
  );
});
