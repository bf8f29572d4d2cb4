import type {
  Resolvers,
  RolloutInput as GqlRolloutInput,
  FixtureGateDecision as GqlDecision,
  FixtureSignalValues,
  MaintenanceItem as GqlItem,
} from '../generated/resolvers-types';
import type { GateDecision, FixtureSignal, RecordedGroupSize, RecordedSignalCount } from '#core/health/fixture-gate';
import type { MaintenanceItem } from '#core/health/health.service';
import { DomainError } from '#core/shared/errors';
import type { RolloutInput } from '#core/deployments/deployment-types';
import { orNull } from './presenters';

const signalValues = (v: Record<FixtureSignal, number | null>): FixtureSignalValues => ({
  thermalDerating: v.thermal_derating,
  thermalShutdown: v.thermal_shutdown,
  supplyFaults: v.supply_faults,
  sourceFailures: v.source_failures,
  unexpectedReboots: v.unexpected_reboots,
  reconnects: v.reconnects,
});

const presentItem = (i: MaintenanceItem): GqlItem => ({
  serial: i.serial,
  name: i.name,
  model: i.model,
  firmware: i.firmware,
  tags: i.tags,
  siteId: i.site?.id ?? null,
  siteName: i.site?.name ?? null,
  state: i.state,
  reasons: i.reasons,
  urgency: i.urgency,
  changedAt: i.changedAt,
  evaluatedAt: i.evaluatedAt,
});

// Decisions recorded before reboots and reconnects were measured lack their exposures: null.
const presentGroup = (g: RecordedGroupSize) => ({ ...g, connectedDeviceDays: g.connectedDeviceDays ?? null });
const presentCount = (c: RecordedSignalCount) => ({ ...c, deviceDays: c.deviceDays ?? null });

const presentDecision = (d: GateDecision): GqlDecision => ({
  state: d.state,
  comparedWith: d.comparedWith,
  updated: presentGroup(d.updated),
  control: d.control ? presentGroup(d.control) : null,
  signals: d.signals.map((s) => ({ ...s, updated: presentCount(s.updated), control: presentCount(s.control) })),
  summary: d.summary,
});

const thresholds = (t: { model: string; overrides: unknown; thresholds: unknown }) => ({
  model: t.model,
  overrides: t.overrides,
  effective: t.thresholds,
});

/** The gate's settings of a deploy input (the domain validates the signal names, as for REST). */
export function fixtureRolloutInput(r: GqlRolloutInput): Partial<RolloutInput> {
  return {
    ...(r.fixtureSignals != null ? { fixtureSignals: r.fixtureSignals as RolloutInput['fixtureSignals'] } : {}),
    ...(r.fixtureMaxRatio != null ? { fixtureMaxRatio: r.fixtureMaxRatio } : {}),
    ...(r.fixtureMinDeviceDays != null ? { fixtureMinDeviceDays: r.fixtureMinDeviceDays } : {}),
    ...(r.fixtureMinEvents != null ? { fixtureMinEvents: r.fixtureMinEvents } : {}),
    ...(r.fixtureConfidence != null ? { fixtureConfidence: r.fixtureConfidence } : {}),
    ...(r.fixtureBaselineDays != null ? { fixtureBaselineDays: r.fixtureBaselineDays } : {}),
  };
}

/** Fixture health: thin adapters over services.health, services.warranty and services.fixtureGate, the same data as REST. */
export const healthResolvers: Resolvers = {
  Rollout: {
    fixtureSignals: (r) => r.fixture_signals,
    fixtureMaxRatio: (r) => r.fixture_max_ratio,
    fixtureMinDeviceDays: (r) => r.fixture_min_device_days,
    fixtureMinEvents: (r) => r.fixture_min_events,
    fixtureConfidence: (r) => r.fixture_confidence,
    fixtureBaselineDays: (r) => r.fixture_baseline_days,
  },
  Device: {
    health: (device, _, ctx) => ctx.loaders.health.load(device.id),
  },
  Deployment: {
    fixtureGate: async (deployment, _, ctx) => {
      const v = await ctx.services.fixtureGate.view(ctx.actor, { deploymentId: deployment.id });
      return {
        gated: v.gated,
        current: presentDecision(v.current),
        recorded: v.recorded
          ? {
              decision: presentDecision(v.recorded.decision),
              evaluatedAt: v.recorded.evaluatedAt,
              pausedAt: v.recorded.pausedAt,
            }
          : null,
      };
    },
  },
  Query: {
    maintenance: async (_, args, ctx) => {
      const eq = args.tag?.indexOf('=') ?? -1;
      if (args.tag != null && eq < 1)
        throw new DomainError('validation_failed', 'tag must be key=value.', {
          errors: [{ field: 'tag', message: 'must be key=value' }],
        });
      const items = await ctx.services.health.maintenance(ctx.actor, {
        ...(args.model != null ? { model: args.model } : {}),
        ...(args.tag != null ? { tag: { key: args.tag.slice(0, eq), value: args.tag.slice(eq + 1) } } : {}),
        ...(args.site != null ? { siteId: args.site } : {}),
        ...(args.limit != null ? { limit: Math.max(1, Math.min(args.limit, 10_000)) } : {}),
      });
      const counts = await ctx.services.health.countsByState(ctx.actor);
      return {
        counts: { ok: counts.ok, watch: counts.watch, replaceSoon: counts.replace_soon, failed: counts.failed },
        items: items.map(presentItem),
      };
    },
    warrantyReport: (_, args, ctx) => orNull(ctx.services.warranty.report(ctx.actor, { serial: args.serial })),
    firmwareRates: async (_, args, ctx) => {
      const rates = await ctx.services.health.versionRates(ctx.actor, {
        ...(args.from != null ? { from: new Date(args.from) } : {}),
        ...(args.to != null ? { to: new Date(args.to) } : {}),
        ...(args.model != null ? { model: args.model } : {}),
      });
      return rates.map((r) => ({
        model: r.model,
        firmware: r.firmware,
        devices: r.devices,
        deviceDays: r.deviceDays,
        connectedDeviceDays: r.connectedDeviceDays,
        events: signalValues(r.events),
        per1000DeviceDays: signalValues(r.per1000DeviceDays),
      }));
    },
    modelHealthThresholds: async (_, args, ctx) => {
      const t = await orNull(ctx.services.health.modelThresholds(ctx.actor, { model: args.model }));
      return t ? thresholds(t) : null;
    },
  },
  Mutation: {
    setModelHealthThresholds: async (_, args, ctx) =>
      thresholds(
        await ctx.services.health.setModelThresholds(ctx.actor, { model: args.model, overrides: args.overrides ?? {} }),
      ),
  },
};
