import type { NewEvent } from '../events/event-types';
import type { LockedAccount } from './account-types';
import { fromMinor } from './money';

/**
 * The rules of allocation: the device quota and the budget of an account, the charge of a
 * claim, and the thresholds (default 80/90/100 % of quota and of budget) announced once each.
 *
 * - provisioned = devices currently claimed (unclaiming frees a quota slot);
 * - spent = sum of the ledger (unclaiming credits nothing: the charge stays);
 * - a threshold of `kind` at `percent` is reached when provisioned (or spent) >= percent % of
 *   quota (or budget); a limit of 0 has no thresholds.
 */

export type ThresholdKind = 'quota' | 'budget';

export interface Threshold {
  kind: ThresholdKind;
  percent: number;
}

export interface Allocation {
  quota: number;
  provisioned: number;
  available: number;
  budget: { amountMinor: number; currency: string; spentMinor: number; remainingMinor: number };
  unitPriceMinor: number;
  thresholds: Array<{ kind: ThresholdKind; percent: number; reachedAt: string | null }>;
}

/** What an account has used: devices claimed now, and the sum of its ledger. */
export interface Usage {
  provisioned: number;
  spentMinor: number;
}

const reached = (value: number, limit: number, percent: number): boolean => limit > 0 && value * 100 >= limit * percent;

/**
 * Every threshold the usage has reached, by the account's percent list (quota and budget of one
 * percent side by side). Not only the ones this usage crossed: which of them are new is decided
 * by the record of those reached before (allocation_thresholds_reached, inserted once each).
 */
export function thresholdsReached(account: LockedAccount, usage: Usage): Threshold[] {
  return account.thresholds.flatMap((percent) => [
    ...(reached(usage.provisioned, account.quota, percent) ? [{ kind: 'quota' as const, percent }] : []),
    ...(reached(usage.spentMinor, account.budgetMinor, percent) ? [{ kind: 'budget' as const, percent }] : []),
  ]);
}

/** The charge of claiming `devices` devices (minor units). */
export const claimChargeMinor = (account: LockedAccount, devices: number): number => account.unitPriceMinor * devices;

/** The usage after a claim of `devices` devices charged `amountMinor`. */
export const usageAfterClaim = (before: Usage, claim: { devices: number; amountMinor: number }): Usage => ({
  provisioned: before.provisioned + claim.devices,
  spentMinor: before.spentMinor + claim.amountMinor,
});

/** The `allocation.threshold_reached` events of thresholds reached for the first time. */
export function thresholdEvents(account: LockedAccount, usage: Usage, firstReached: Threshold[]): NewEvent[] {
  return firstReached.map((t) => ({
    accountId: account.id,
    type: 'allocation.threshold_reached',
    subject: `${t.kind}:${t.percent}`,
    data:
      t.kind === 'quota'
        ? { kind: 'quota', percent: t.percent, quota: account.quota, provisioned: usage.provisioned }
        : {
            kind: 'budget',
            percent: t.percent,
            budget: fromMinor(account.budgetMinor),
            spent: fromMinor(usage.spentMinor),
            currency: account.currency,
          },
  }));
}

/**
 * The allocation as shown: every configured threshold of quota and of budget (ascending
 * percent), with when it was first reached.
 */
export function allocationOf(
  account: LockedAccount,
  usage: Usage,
  reachedAt: Array<Threshold & { reachedAt: string }>,
): Allocation {
  const when = new Map(reachedAt.map((r) => [`${r.kind}:${r.percent}`, r.reachedAt]));
  const percents = [...account.thresholds].sort((a, b) => a - b);
  return {
    quota: account.quota,
    provisioned: usage.provisioned,
    available: Math.max(0, account.quota - usage.provisioned),
    budget: {
      amountMinor: account.budgetMinor,
      currency: account.currency,
      spentMinor: usage.spentMinor,
      remainingMinor: Math.max(0, account.budgetMinor - usage.spentMinor),
    },
    unitPriceMinor: account.unitPriceMinor,
    thresholds: (['quota', 'budget'] as const).flatMap((kind) =>
      percents.map((percent) => ({ kind, percent, reachedAt: when.get(`${kind}:${percent}`) ?? null })),
    ),
  };
}
