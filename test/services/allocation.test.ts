import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { DomainError } from '#core/shared/errors';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { serials } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';

/**
 * Quota, budget, ledger and thresholds: rules of the claim and allocation services, shown over
 * the services and a database of their own. How REST presents these refusals (problem+json,
 * snake_case details) is tested on the wire in test/integration/allocation.test.ts.
 */
describe('allocation service: quota, budget, ledger and thresholds', () => {
  let harness: ServiceHarness;

  beforeAll(async () => {
    harness = await startServiceHarness();
  });
  afterAll(async () => ifStarted(harness)?.close());

  const account = async (limits: { quota: number; budget: number; unitPrice: number }) => {
    const acc = await harness.createAccount(limits);
    await harness.services.models.register(acc.admin, { name: 'LX-200', description: '' });
    return acc;
  };
  const claim = (acc: HarnessAccount, input: { serials: string[] } | { serial: string }) =>
    harness.services.claims.claim(acc.admin, { ...input, model: 'LX-200' });
  /** The DomainError a claim was refused with. */
  const refusal = async (work: Promise<unknown>): Promise<DomainError> => {
    const error = await work.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    return error as DomainError;
  };
  const ledger = (acc: HarnessAccount) =>
    harness.database.knex('ledger_entries').where({ account_id: acc.accountId }) as Promise<
      Array<{ devices: number | string }>
    >;

  it('counts claimed devices and spent budget, and marks the thresholds reached', async () => {
    const acc = await account({ quota: 10, budget: 100, unitPrice: 2.5 });
    const empty = await harness.services.allocation.get(acc.admin);
    expect(empty).toMatchObject({
      quota: 10,
      provisioned: 0,
      available: 10,
      budget: { amountMinor: 10_000, spentMinor: 0, remainingMinor: 10_000, currency: 'EUR' },
      unitPriceMinor: 250,
    });
    expect(empty.thresholds.map((t) => `${t.kind}:${t.percent}:${t.reachedAt}`)).toEqual(
      ['quota:80', 'quota:90', 'quota:100', 'budget:80', 'budget:90', 'budget:100'].map((t) => `${t}:null`),
    );
    await claim(acc, { serials: serials('AL', 8) });
    const after = await harness.services.allocation.get(acc.admin);
    expect(after).toMatchObject({ provisioned: 8, available: 2, budget: { spentMinor: 2000, remainingMinor: 8000 } });
    const reached = after.thresholds.filter((t) => t.reachedAt !== null).map((t) => `${t.kind}:${t.percent}`);
    expect(reached).toEqual(['quota:80']);
  });

  it('refuses a claim past the quota, naming the serials that do not fit, and writes nothing', async () => {
    const acc = await account({ quota: 5, budget: 1000, unitPrice: 1 });
    await claim(acc, { serials: serials('Q', 3) });
    const error = await refusal(claim(acc, { serials: serials('Q', 3, 4) }));
    expect(error.code).toBe('quota_exceeded');
    expect(error.details).toMatchObject({
      quota: 5,
      provisioned: 3,
      available: 2,
      requested: 3,
      offending_serials: ['Q-0006'],
    });
    expect(await harness.services.allocation.get(acc.admin)).toMatchObject({
      provisioned: 3,
      budget: { spentMinor: 300 },
    });
    expect(await ledger(acc)).toHaveLength(1);
  });

  it('refuses a claim past the budget and writes nothing', async () => {
    const acc = await account({ quota: 100, budget: 10, unitPrice: 3 });
    await claim(acc, { serials: serials('M', 2) });
    const error = await refusal(claim(acc, { serials: serials('M', 2, 3) }));
    expect(error.code).toBe('budget_exceeded');
    expect(error.details).toMatchObject({ remaining: 4, required: 6, currency: 'EUR', offending_serials: ['M-0004'] });
    expect(await harness.services.allocation.get(acc.admin)).toMatchObject({
      provisioned: 2,
      budget: { spentMinor: 600, remainingMinor: 400 },
    });
    expect(await ledger(acc)).toHaveLength(1);
  });

  it('records allocation.threshold_reached once per threshold of quota and of budget', async () => {
    const acc = await account({ quota: 10, budget: 20, unitPrice: 2 });
    await claim(acc, { serials: serials('T', 8) }); // 80 % of quota, 80 % of budget
    await claim(acc, { serials: ['T-0009'] }); // 90 %
    await harness.services.devices.unclaim(acc.admin, { serial: 'T-0009' }); // back to 80 % of quota; the budget stays spent
    await claim(acc, { serials: ['T-0010'] }); // quota 90 % again: no second event; budget 100 %
    const events = await harness.services.events.recent(acc.admin, { types: ['allocation.threshold_reached'] });
    expect(events.map((e) => `${String(e.data.kind)}:${String(e.data.percent)}`).sort()).toEqual([
      'budget:100',
      'budget:80',
      'budget:90',
      'quota:80',
      'quota:90',
    ]);
  });

  it(
    '20 concurrent claims racing for the last 5 quota slots claim exactly 5, with a consistent ledger',
    { timeout: 120_000 },
    async () => {
      const acc = await account({ quota: 25, budget: 1000, unitPrice: 1.5 });
      await claim(acc, { serials: serials('R', 20) });
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => claim(acc, { serial: `RACE-${i}` })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(refused.map((r) => (r.reason as DomainError).code)).toEqual(Array(15).fill('quota_exceeded'));
      expect(await harness.services.allocation.get(acc.admin)).toMatchObject({
        provisioned: 25,
        available: 0,
        budget: { spentMinor: 3750 },
      });
      const entries = await ledger(acc);
      expect(entries).toHaveLength(6);
      expect(entries.reduce((sum, l) => sum + Number(l.devices), 0)).toBe(25);
    },
  );

  it("two accounts racing for the same serial: exactly one wins, the other hears only 'already claimed'", async () => {
    const x = await account({ quota: 100, budget: 1000, unitPrice: 1 });
    const y = await account({ quota: 100, budget: 1000, unitPrice: 1 });
    const [rx, ry] = await Promise.allSettled([
      claim(x, { serials: ['CONTESTED-1', 'X-ONLY-1'] }),
      claim(y, { serials: ['CONTESTED-1', 'Y-ONLY-1'] }),
    ]);
    expect([rx.status, ry.status].sort()).toEqual(['fulfilled', 'rejected']);
    const loser = (rx.status === 'rejected' ? rx : ry) as PromiseRejectedResult;
    expect((loser.reason as DomainError).code).toBe('claim_rejected');
    expect((loser.reason as DomainError).details).toEqual({
      offending_serials: [{ serial: 'CONTESTED-1', reason: 'already_claimed' }],
    });
  });
});
