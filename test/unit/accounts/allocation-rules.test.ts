import { describe, it, expect } from 'vitest';
import {
  allocationOf,
  claimChargeMinor,
  thresholdEvents,
  thresholdsReached,
  usageAfterClaim,
  type Threshold,
} from '#core/accounts/allocation-rules';
import type { LockedAccount } from '#core/accounts/account-types';

const account = (over: Partial<LockedAccount> = {}): LockedAccount => ({
  id: 'acc',
  quota: 10,
  budgetMinor: 10_000,
  currency: 'EUR',
  unitPriceMinor: 1_000,
  thresholds: [80, 90, 100],
  ...over,
});
const q = (percent: number): Threshold => ({ kind: 'quota', percent });
const b = (percent: number): Threshold => ({ kind: 'budget', percent });

describe('allocation rules', () => {
  describe('thresholds reached after a claim', () => {
    const cases: Array<[string, LockedAccount, { provisioned: number; spentMinor: number }, Threshold[]]> = [
      ['nothing used', account(), { provisioned: 0, spentMinor: 0 }, []],
      ['just under 80 %', account(), { provisioned: 7, spentMinor: 7_999 }, []],
      ['exactly 80 % of quota and budget', account(), { provisioned: 8, spentMinor: 8_000 }, [q(80), b(80)]],
      ['quota at 90 %, budget at 80 %', account(), { provisioned: 9, spentMinor: 8_500 }, [q(80), b(80), q(90)]],
      [
        'everything used',
        account(),
        { provisioned: 10, spentMinor: 10_000 },
        [q(80), b(80), q(90), b(90), q(100), b(100)],
      ],
      [
        'beyond the budget (the price was raised)',
        account(),
        { provisioned: 1, spentMinor: 12_000 },
        [b(80), b(90), b(100)],
      ],
      ['a quota of 0 has no thresholds', account({ quota: 0 }), { provisioned: 0, spentMinor: 0 }, []],
      [
        'a budget of 0 has no thresholds (free devices)',
        account({ budgetMinor: 0, unitPriceMinor: 0 }),
        { provisioned: 10, spentMinor: 0 },
        [q(80), q(90), q(100)],
      ],
      [
        'percent is not rounded: 2 of 3 is below 67 %',
        account({ quota: 3, thresholds: [67] }),
        { provisioned: 2, spentMinor: 0 },
        [],
      ],
      [
        'in the order of the account list',
        account({ thresholds: [100, 50] }),
        { provisioned: 10, spentMinor: 5_000 },
        [q(100), q(50), b(50)],
      ],
    ];
    it.each(cases)('%s', (_, acc, usage, expected) => {
      expect(thresholdsReached(acc, usage)).toEqual(expected);
    });
  });

  it.each([
    [0, 1_000, 0],
    [3, 1_000, 3_000],
    [1000, 199, 199_000],
    [5, 0, 0],
  ])('claiming %i devices at %i costs %i', (devices, unitPriceMinor, cost) => {
    expect(claimChargeMinor(account({ unitPriceMinor }), devices)).toBe(cost);
  });

  it('counts a claim into the usage', () => {
    expect(usageAfterClaim({ provisioned: 4, spentMinor: 4_000 }, { devices: 3, amountMinor: 3_000 })).toEqual({
      provisioned: 7,
      spentMinor: 7_000,
    });
  });

  it('announces only the thresholds reached for the first time, with the numbers of their kind', () => {
    const events = thresholdEvents(account(), { provisioned: 9, spentMinor: 8_550 }, [q(90), b(80)]);
    expect(events).toEqual([
      {
        accountId: 'acc',
        type: 'allocation.threshold_reached',
        subject: 'quota:90',
        data: { kind: 'quota', percent: 90, quota: 10, provisioned: 9 },
      },
      {
        accountId: 'acc',
        type: 'allocation.threshold_reached',
        subject: 'budget:80',
        data: { kind: 'budget', percent: 80, budget: 100, spent: 85.5, currency: 'EUR' },
      },
    ]);
    expect(thresholdEvents(account(), { provisioned: 9, spentMinor: 8_550 }, [])).toEqual([]);
  });

  it('shows every threshold in ascending order with when it was reached, and never negative room', () => {
    const allocation = allocationOf(account({ thresholds: [100, 80] }), { provisioned: 11, spentMinor: 12_000 }, [
      { ...q(80), reachedAt: '2026-01-01T00:00:00.000Z' },
      { ...b(100), reachedAt: '2026-01-02T00:00:00.000Z' },
    ]);
    expect(allocation).toEqual({
      quota: 10,
      provisioned: 11,
      available: 0,
      budget: { amountMinor: 10_000, currency: 'EUR', spentMinor: 12_000, remainingMinor: 0 },
      unitPriceMinor: 1_000,
      thresholds: [
        { kind: 'quota', percent: 80, reachedAt: '2026-01-01T00:00:00.000Z' },
        { kind: 'quota', percent: 100, reachedAt: null },
        { kind: 'budget', percent: 80, reachedAt: null },
        { kind: 'budget', percent: 100, reachedAt: '2026-01-02T00:00:00.000Z' },
      ],
    });
  });
});
