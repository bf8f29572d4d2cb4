import type { ServiceDeps } from '../service-deps';
import type { Actor } from '../shared/actor';
import { DomainError } from '../shared/errors';
import type { Device } from '../devices/device-types';
import type { PushQueue } from '../events/push-queue';
import type { LuminaireLiveFeed } from './luminaire-live';
import type { RecordedReading } from './luminaire-ingest';
import {
  selectFleetEnergy,
  selectRawPoints,
  selectBuckets,
  selectStates,
  type StateReadRow,
} from './store/luminaire-read.store';
import type {
  EnergyGrouping,
  LuminaireSeries,
  LuminaireSummary,
  FleetEnergy,
  LuminairePoint,
  LuminaireBucket,
} from './luminaire-types';

export const RESOLUTIONS = ['raw', 'hour', 'day'] as const;
export type Resolution = (typeof RESOLUTIONS)[number];

/** Longest range per resolution (days) and most points in one answer. */
export const SERIES_LIMITS = { rawDays: 31, hourDays: 366, dayDays: 3660, maxPoints: 50_000 } as const;
/** Default range when `from` is left out, per resolution (days before `to`). */
const DEFAULT_DAYS: Record<Resolution, number> = { raw: 1, hour: 7, day: 90 };
const DAY_MS = 86_400_000;

/**
 * What the service answers about luminaires (docs/luminaire-data.md): a device's series, its
 * summary on the device record, and fleet energy. Devices are found through the device service
 * with the caller's account, so another account's serial is a 404 like an unknown one.
 */
export class LuminaireService {
  constructor(
    private readonly deps: Pick<ServiceDeps, 'knex' | 'clock'>,
    private readonly area: {
      devices: { get(actor: Actor, input: { serial: string }): Promise<Device> };
      live: LuminaireLiveFeed;
    },
  ) {}

  /** The device's readings as they are stored (404 for a serial not of the caller's account). */
  async live(actor: Actor, input: { serial: string }): Promise<PushQueue<RecordedReading>> {
    const device = await this.area.devices.get(actor, { serial: input.serial });
    return this.area.live.subscribe({ accountId: actor.accountId, deviceId: device.id });
  }

  async series(
    actor: Actor,
    input: { serial: string; from?: Date | undefined; to?: Date | undefined; resolution?: Resolution | undefined },
  ): Promise<LuminaireSeries> {
    const device = await this.area.devices.get(actor, { serial: input.serial });
    const resolution = input.resolution ?? 'hour';
    const to = input.to ?? this.deps.clock.now();
    const from = input.from ?? new Date(to.getTime() - DEFAULT_DAYS[resolution] * DAY_MS);
    const maxDays =
      resolution === 'raw'
        ? SERIES_LIMITS.rawDays
        : resolution === 'hour'
          ? SERIES_LIMITS.hourDays
          : SERIES_LIMITS.dayDays;
    if (from.getTime() >= to.getTime()) throw rangeError('from', '`from` must be before `to`');
    if (to.getTime() - from.getTime() > maxDays * DAY_MS)
      throw rangeError('from', `at most ${maxDays} days at resolution ${resolution}`);
    const limit = SERIES_LIMITS.maxPoints + 1;
    const { knex } = this.deps;
    let points: Array<LuminairePoint | LuminaireBucket>;
    if (resolution === 'raw') {
      const rows = await selectRawPoints(knex, { deviceId: device.id, from, to, limit });
      points = rows.map((r) => {
        const { at, bad_clock, ...values } = r;
        const point: LuminairePoint = { at: new Date(at).toISOString(), badClock: bad_clock };
        for (const [k, v] of Object.entries(values))
          if (v !== null) (point as unknown as Record<string, unknown>)[k] = Number(v);
        return point;
      });
    } else {
      const table = resolution === 'hour' ? 'luminaire_hourly' : 'luminaire_daily';
      points = await selectBuckets(knex, { table, deviceId: device.id, from, to, limit });
    }
    const truncated = points.length > SERIES_LIMITS.maxPoints;
    return {
      serial: device.serial,
      resolution,
      from: from.toISOString(),
      to: to.toISOString(),
      truncated,
      points: truncated ? points.slice(0, SERIES_LIMITS.maxPoints) : points,
    };
  }

  /** The device record with its luminaire summary (null before its first reading). */
  async deviceRecord(
    actor: Actor,
    input: { serial: string },
  ): Promise<{ device: Device; luminaire: LuminaireSummary | null }> {
    const device = await this.area.devices.get(actor, { serial: input.serial });
    return { device, luminaire: await this.summary(actor, { deviceId: device.id }) };
  }

  /** Summaries of these devices of the caller's account (devices without readings are absent). */
  async summaries(actor: Actor, input: { deviceIds: string[] }): Promise<Map<string, LuminaireSummary>> {
    if (input.deviceIds.length === 0) return new Map();
    const rows = await selectStates(this.deps.knex, { accountId: actor.accountId, deviceIds: input.deviceIds });
    return new Map(rows.map((r) => [r.device_id, toSummary(r)]));
  }

  async summary(actor: Actor, input: { deviceId: string }): Promise<LuminaireSummary | null> {
    return (await this.summaries(actor, { deviceIds: [input.deviceId] })).get(input.deviceId) ?? null;
  }

  /** kWh per UTC day, grouped; days run from `from` to `to` inclusive (YYYY-MM-DD). */
  async fleetEnergy(
    actor: Actor,
    input: { from?: string | undefined; to?: string | undefined; groupBy: EnergyGrouping },
  ): Promise<FleetEnergy> {
    const to = input.to ?? this.deps.clock.now().toISOString().slice(0, 10);
    const from = input.from ?? new Date(Date.parse(to) - 29 * DAY_MS).toISOString().slice(0, 10);
    const span = (Date.parse(to) - Date.parse(from)) / DAY_MS;
    if (span < 0) throw rangeError('from', '`from` must not be after `to`');
    if (span >= SERIES_LIMITS.dayDays) throw rangeError('from', `at most ${SERIES_LIMITS.dayDays} days`);
    const rows = await selectFleetEnergy(this.deps.knex, {
      accountId: actor.accountId,
      from,
      to,
      group: input.groupBy,
    });
    const days: string[] = [];
    for (let t = Date.parse(from); t <= Date.parse(to); t += DAY_MS) days.push(new Date(t).toISOString().slice(0, 10));
    const index = new Map(days.map((d, i) => [d, i]));
    const groups = new Map<string | null, number[]>();
    for (const r of rows) {
      let kwh = groups.get(r.key);
      if (!kwh) groups.set(r.key, (kwh = days.map(() => 0)));
      const i = index.get(r.day);
      if (i !== undefined) kwh[i] = (kwh[i] ?? 0) + r.kwh;
    }
    return {
      from,
      to,
      groupBy: input.groupBy.by === 'tag' ? `tag:${input.groupBy.key}` : input.groupBy.by,
      days,
      groups: [...groups.entries()]
        .map(([key, kwh]) => ({ key, kwh, totalKwh: kwh.reduce((a, b) => a + b, 0) }))
        .sort((a, b) => b.totalKwh - a.totalKwh),
    };
  }
}

function rangeError(field: string, message: string): DomainError {
  return new DomainError('validation_failed', message, { errors: [{ field, message }] });
}

function toSummary(r: StateReadRow): LuminaireSummary {
  const lifetime = (c: string) => {
    const s = r.counters[c];
    return s ? s.offset + s.last : null;
  };
  const burnS = lifetime('source_on_s');
  return {
    latest: r.latest,
    latestAt: r.latest_at ? new Date(r.latest_at).toISOString() : null,
    lifetimeEnergyKwh: lifetime('energy_wh') === null ? null : lifetime('energy_wh')! / 1000,
    burnHours: burnS === null ? null : burnS / 3600,
    ratedLifeH: r.latest.rated_life_h ?? null,
    points: Number(r.points),
    counterResets: r.counter_resets,
    badClockCount: Number(r.bad_clock_count),
    lastBadClockAt: r.last_bad_clock_at ? new Date(r.last_bad_clock_at).toISOString() : null,
    refusedFields: r.refused_fields,
  };
}
