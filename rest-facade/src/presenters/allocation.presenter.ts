import type { Allocation } from '#core/accounts/allocation.service';
import { fromMinor } from '#core/accounts/money';

export function presentAllocation(a: Allocation) {
  return {
    quota: a.quota,
    provisioned: a.provisioned,
    available: a.available,
    budget: {
      amount: fromMinor(a.budget.amountMinor),
      currency: a.budget.currency,
      spent: fromMinor(a.budget.spentMinor),
      remaining: fromMinor(a.budget.remainingMinor),
    },
    unit_price: fromMinor(a.unitPriceMinor),
    thresholds: a.thresholds.map((t) => ({ kind: t.kind, percent: t.percent, reached_at: t.reachedAt })),
  };
}
