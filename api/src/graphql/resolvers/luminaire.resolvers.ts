import type {
  Resolvers,
  LuminaireValues,
  LuminaireSummary as GqlSummary,
  LuminaireReading,
} from '../generated/resolvers-types';
import type { LuminaireBucket, LuminairePoint, LuminaireSummary } from '#core/luminaire/luminaire-types';
import type { RecordedReading } from '#core/luminaire/luminaire-ingest';
import type { EnergyGrouping } from '#core/luminaire/luminaire-types';
import { DomainError } from '#core/shared/errors';
import { liveField } from './presenters';

/** Wire names of a reading (snake_case, as the device sends them) -> the GraphQL fields. */
function presentValues(v: Record<string, unknown>): LuminaireValues {
  const n = (k: string) => (typeof v[k] === 'number' ? v[k] : null);
  return {
    energyWh: n('energy_wh'),
    powerW: n('power_w'),
    gearOperatingS: n('gear_operating_s'),
    gearStarts: n('gear_starts'),
    gearTempC: n('gear_temp_c'),
    gearThermalDerating: n('gear_thermal_derating'),
    gearThermalShutdown: n('gear_thermal_shutdown'),
    supplyVoltageV: n('supply_voltage_v'),
    supplyUndervoltage: n('supply_undervoltage'),
    supplyOvervoltage: n('supply_overvoltage'),
    sourceOnS: n('source_on_s'),
    sourceStarts: n('source_starts'),
    sourceTempC: n('source_temp_c'),
    sourceFailures: n('source_failures'),
    outputLevelPct: n('output_level_pct'),
    ratedLifeH: n('rated_life_h'),
  };
}

function presentPoint(p: LuminairePoint): LuminaireReading {
  const { at, badClock, lifetime_energy_wh, ...values } = p;
  return { at, badClock, lifetimeEnergyWh: lifetime_energy_wh ?? null, values: presentValues(values) };
}

function presentRecorded(r: RecordedReading): LuminaireReading {
  return { at: r.at.toISOString(), badClock: false, lifetimeEnergyWh: null, values: presentValues(r.values) };
}

function presentSummary(s: LuminaireSummary | null): GqlSummary | null {
  if (!s) return null;
  return {
    latest: presentValues(s.latest),
    latestAt: s.latestAt,
    lifetimeEnergyKwh: s.lifetimeEnergyKwh,
    burnHours: s.burnHours,
    ratedLifeH: s.ratedLifeH,
    points: s.points,
    counterResets: s.counterResets,
    badClockCount: s.badClockCount,
    lastBadClockAt: s.lastBadClockAt,
    refusedFields: Object.entries(s.refusedFields).map(([field, r]) => ({
      field,
      count: r.count,
      reason: r.reason as GqlSummary['refusedFields'][number]['reason'],
      value: r.value,
      at: r.at,
    })),
  };
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** Luminaire data: thin adapters over services.luminaire, the same data as REST. */
export const luminaireResolvers: Resolvers = {
  Device: {
    // Batched per request: a list of devices asking for it makes one query, not one per device.
    luminaire: async (device, _, ctx) => presentSummary(await ctx.loaders.luminaire.load(device.id)),
    luminaireSeries: async (device, args, ctx) => {
      const series = await ctx.services.luminaire.series(ctx.actor, {
        serial: device.serial,
        from: args.from ? new Date(args.from) : undefined,
        to: args.to ? new Date(args.to) : undefined,
        resolution: args.resolution,
      });
      const raw = series.resolution === 'raw';
      return {
        resolution: series.resolution,
        from: series.from,
        to: series.to,
        truncated: series.truncated,
        readings: raw ? (series.points as LuminairePoint[]).map(presentPoint) : [],
        buckets: raw ? [] : (series.points as LuminaireBucket[]),
      };
    },
  },
  Query: {
    fleetEnergy: async (_, args, ctx) => {
      for (const [field, value] of [
        ['from', args.from],
        ['to', args.to],
      ] as const)
        if (value != null && (!DAY.test(value) || Number.isNaN(Date.parse(value))))
          throw new DomainError('validation_failed', `${field} must be a date (YYYY-MM-DD).`, {
            errors: [{ field, message: 'must be YYYY-MM-DD' }],
          });
      const by = args.groupBy;
      if (by === 'tag' && !args.tag)
        throw new DomainError('validation_failed', 'groupBy tag needs the tag name in `tag`.', {
          errors: [{ field: 'tag', message: 'required with groupBy: tag' }],
        });
      const groupBy: EnergyGrouping = by === 'tag' ? { by: 'tag', key: args.tag!.slice(0, 64) } : { by };
      const energy = await ctx.services.luminaire.fleetEnergy(ctx.actor, {
        from: args.from ?? undefined,
        to: args.to ?? undefined,
        groupBy,
      });
      return energy;
    },
  },
  Subscription: {
    luminaireReadings: liveField(
      (_, args, ctx) => ctx.services.luminaire.live(ctx.actor, { serial: args.serial }),
      presentRecorded,
    ),
  },
};
