import type { GraphQLContext } from '../context';
import type { Allocation } from '../../domain/accounts/allocation.service';
import type { FleetSummary } from '../../domain/fleet/fleet-read.service';
import { money } from './presenters';

export const presentSummary = (s: FleetSummary) => ({
  total: s.total,
  online: s.online,
  offline: s.offline,
  updating: s.updating,
  byModel: s.byModel,
  byFirmware: s.byFirmware,
  quota: s.quota,
  provisioned: s.provisioned,
  budget: money(s.budget.amountMinor, s.budget.currency),
  spent: money(s.budget.spentMinor, s.budget.currency),
});

export const presentAllocation = (a: Allocation) => ({
  quota: a.quota,
  provisioned: a.provisioned,
  remaining: a.available,
  budget: money(a.budget.amountMinor, a.budget.currency),
  spent: money(a.budget.spentMinor, a.budget.currency),
  remainingBudget: money(a.budget.remainingMinor, a.budget.currency),
  unitPrice: money(a.unitPriceMinor, a.budget.currency),
  thresholds: [...new Set(a.thresholds.map((t) => t.percent))].sort((x, y) => x - y),
  thresholdsReached: a.thresholds
    .filter((t) => t.reachedAt !== null)
    .map((t) => ({ kind: t.kind, percent: t.percent, reachedAt: t.reachedAt })),
});

export const fleetResolvers = {
  Query: {
    fleetSummary: async (_: unknown, __: unknown, ctx: GraphQLContext) =>
      presentSummary(await ctx.services.fleet.summary(ctx.actor)),
    allocation: async (_: unknown, __: unknown, ctx: GraphQLContext) =>
      presentAllocation(await ctx.services.allocation.get(ctx.actor)),
  },
  Subscription: {
    fleetSummaryChanged: {
      subscribe: (_: unknown, __: unknown, ctx: GraphQLContext) => ctx.live.fleetSummary(ctx.actor),
      resolve: (summary: unknown) => summary,
    },
  },
};
