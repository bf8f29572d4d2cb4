import type { Allocation } from '#core/accounts/allocation.service';
import type { FleetSummary } from '#core/fleet/fleet-read.service';
import type {
  Allocation as AllocationType,
  FleetSummary as FleetSummaryType,
  Resolvers,
} from '../generated/resolvers-types';
import { liveField, money } from './presenters';

export const presentSummary = (s: FleetSummary): FleetSummaryType => ({
  total: s.total,
  online: s.online,
  offline: s.offline,
  updating: s.updating,
  byModel: s.byModel,
  byFirmware: s.byFirmware,
  bySite: s.bySite,
  quota: s.quota,
  provisioned: s.provisioned,
  budget: money(s.budget.amountMinor, s.budget.currency),
  spent: money(s.budget.spentMinor, s.budget.currency),
});

export const presentAllocation = (a: Allocation): AllocationType => ({
  quota: a.quota,
  provisioned: a.provisioned,
  remaining: a.available,
  budget: money(a.budget.amountMinor, a.budget.currency),
  spent: money(a.budget.spentMinor, a.budget.currency),
  remainingBudget: money(a.budget.remainingMinor, a.budget.currency),
  unitPrice: money(a.unitPriceMinor, a.budget.currency),
  thresholds: [...new Set(a.thresholds.map((t) => t.percent))].sort((x, y) => x - y),
  thresholdsReached: a.thresholds.flatMap((t) =>
    t.reachedAt === null ? [] : [{ kind: t.kind, percent: t.percent, reachedAt: t.reachedAt }],
  ),
});

export const fleetResolvers: Resolvers = {
  Query: {
    fleetSummary: async (_, __, ctx) => presentSummary(await ctx.services.fleet.summary(ctx.actor)),
    allocation: async (_, __, ctx) => presentAllocation(await ctx.services.allocation.get(ctx.actor)),
  },
  Subscription: {
    // The live view pushes summaries already presented (LiveReaders.fleetSummary).
    fleetSummaryChanged: liveField(
      (_, __, ctx) => ctx.live.fleetSummary(ctx.actor),
      (summary) => summary,
    ),
  },
};
