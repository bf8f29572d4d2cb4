import { createHash } from 'node:crypto';
import type { ServiceDeps } from '../service-deps';
import type { LuminaireValues, RefusedLuminaireField } from '#protocol/luminaire-fields';
import { applyCounters, type LuminaireCounters } from './counter-segments';
import { RollupBuckets, dayOf, hourOf } from './rollup-buckets';
import type { LuminairePartitions } from './luminaire-partitions';
import {
  attributionIds,
  insertPoints,
  lockStates,
  writeBatch,
  type LockedState,
  type PointRow,
  type StateRow,
} from './store/luminaire-write.store';

/** One luminaire message as the broker read it (protocol/luminaire-fields.ts readLuminaire). */
export interface LuminaireReport {
  accountId: string;
  deviceId: string;
  serial: string;
  values: LuminaireValues;
  /** The reading's time: the device's, or the time of receipt for a bad clock. */
  at: Date;
  badClock: boolean;
  refused: RefusedLuminaireField[];
}

/** A reading stored (after the commit): what the live subscription pushes. */
export interface RecordedReading {
  accountId: string;
  deviceId: string;
  serial: string;
  at: Date;
  values: LuminaireValues;
}

export interface LuminaireIngestOptions {
  deps: Pick<ServiceDeps, 'knex' | 'clock' | 'logger'>;
  partitions: Pick<LuminairePartitions, 'ensureFor'>;
  /**
   * Flush period (ms). Default 1,000: a device's PUBACK waits at most about this plus the commit
   * (readings come every 15 minutes by default, so the wait costs a device nothing), and a batch
   * costs about the same whatever its size: at 10,000 fixtures a minute, 500 ms batches cost
   * 367 µs of service and PostgreSQL CPU per reading and 1 s batches 294 µs
   * (bench/luminaire-ingest.bench.ts, quiet machine, CPU yardstick 299 ms).
   */
  flushIntervalMs?: number;
  /** Readings waiting for a flush beyond which new ones are refused (not acknowledged). Default 50,000. */
  maxPending?: number;
  /** After each commit, with the readings it stored. */
  onRecorded?: (readings: RecordedReading[]) => void;
  /** Readings written per flush, and how long it took. */
  onFlushed?: (info: { points: number; ms: number }) => void;
}

interface Pending {
  report: LuminaireReport;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Luminaire readings, stored in batches (docs/luminaire-data.md "Ingestion"). Each reading's
 * promise settles with the commit of the batch that holds it, and the broker sends the device's
 * PUBACK only then: a reading acknowledged is on disk, so kill -9 loses none. A failed batch
 * rejects its readings (the connection closes without PUBACK, the device sends them again), so
 * nothing is kept in memory across failures and the buffer stays bounded by `maxPending`.
 */
export class LuminaireIngest {
  private pending: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | null = null;
  private readonly attributions = new Map<string, number>();
  /** Fingerprint of each (model, firmware, site) seen: hashed once, not for every device of every batch. */
  private readonly fingerprints = new Map<string, string>();
  /** Devices whose state row exists (no INSERT for them on the next batch). */
  private readonly withState = new Set<string>();

  constructor(private readonly options: LuminaireIngestOptions) {}

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.options.flushIntervalMs ?? 1000);
    this.timer.unref();
  }

  get backlog(): number {
    return this.pending.length;
  }

  /** Settles once the reading (and its refusals) are committed; rejects when they could not be. */
  record(report: LuminaireReport): Promise<void> {
    if (this.pending.length >= (this.options.maxPending ?? 50_000))
      return Promise.reject(new Error('luminaire ingest backlog full'));
    const stamped = report.badClock ? { ...report, at: this.receiptStamp(report.deviceId, report.at) } : report;
    return new Promise((resolve, reject) => this.pending.push({ report: stamped, resolve, reject }));
  }

  /** Last receipt time given to a device's bad-clock reading (a device is served by one process at a time). */
  private readonly receiptStamps = new Map<string, number>();

  /**
   * Receipt times of one device's bad-clock readings never repeat: two within a millisecond would
   * otherwise share a key and the second be taken for a redelivery of the first. (They never meet
   * a reading of a good clock: `bad_clock` is part of the key.)
   */
  private receiptStamp(deviceId: string, at: Date): Date {
    const last = this.receiptStamps.get(deviceId);
    const t = last !== undefined && at.getTime() <= last ? last + 1 : at.getTime();
    if (this.receiptStamps.size >= 100_000) this.receiptStamps.clear();
    this.receiptStamps.set(deviceId, t);
    return new Date(t);
  }

  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.write(batch).finally(() => {
      this.flushing = null;
    });
    await this.flushing;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private async write(batch: Pending[]): Promise<void> {
    const started = performance.now();
    try {
      const stored = await this.store(batch.map((p) => p.report));
      for (const p of batch) p.resolve();
      this.options.onFlushed?.({ points: stored.length, ms: performance.now() - started });
      if (stored.length) this.options.onRecorded?.(stored);
    } catch (err) {
      this.options.deps.logger.error(
        { err, readings: batch.length },
        'luminaire flush failed; devices will send again',
      );
      for (const p of batch) p.reject(err);
    }
  }

  private async store(reports: LuminaireReport[]): Promise<RecordedReading[]> {
    const withValues = reports.filter((r) => Object.keys(r.values).length > 0);
    await this.options.partitions.ensureFor(
      [...new Set(withValues.map((r) => dayOf(r.at).getTime()))].map((t) => new Date(t)),
    );
    return this.options.deps.knex.transaction(async (trx) => {
      const deviceIds = [...new Set(reports.map((r) => r.deviceId))];
      const states = new Map(
        (await lockStates(trx, { deviceIds, create: deviceIds.filter((id) => !this.withState.has(id)) })).map((s) => [
          s.device_id,
          s,
        ]),
      );
      const attribution = await this.attributionsOf(trx, [...states.values()]);
      // Per device in reading order: counters move forward only (counter-segments.ts).
      const ordered = [...reports].sort((a, b) => a.at.getTime() - b.at.getTime());
      const work = new Map<string, DeviceWork>();
      for (const s of states.values()) work.set(s.device_id, startWork(s));
      const points: Array<{ report: LuminaireReport; row: PointRow; counters: ReturnType<typeof applyCounters> }> = [];
      for (const report of ordered) {
        const w = work.get(report.deviceId);
        // Unclaimed meanwhile: nothing to record it for (acknowledged and dropped).
        if (!w) continue;
        noteRefusals(w.state, report);
        if (Object.keys(report.values).length === 0) continue;
        const inOrder = w.counters.latestAt === null || report.at.getTime() >= w.counters.latestAt.getTime();
        const counters = applyCounters(w.counters, report);
        if (inOrder) Object.assign(w.state.latest, report.values);
        if (report.badClock) {
          w.state.bad_clock_count += 1;
          w.state.last_bad_clock_at = report.at.toISOString();
        }
        points.push({
          report,
          counters,
          row: {
            deviceId: report.deviceId,
            at: report.at.toISOString(),
            badClock: report.badClock,
            values: report.values,
            lifetimeEnergyWh: report.values.energy_wh === undefined ? null : counters.lifetimeEnergyWh,
          },
        });
      }
      const inserted = points.length
        ? await insertPoints(
            trx,
            points.map((p) => p.row),
          )
        : new Set<string>();
      const hourly = new RollupBuckets(hourOf);
      const daily = new RollupBuckets(dayOf);
      const recorded: RecordedReading[] = [];
      for (const p of points) {
        // A reading sent again after a lost PUBACK is stored already: counted once.
        if (!inserted.has(`${p.row.deviceId}|${p.row.at}|${p.row.badClock}`)) continue;
        const w = work.get(p.report.deviceId)!;
        w.state.points += 1;
        if (p.counters.reset) w.state.counter_resets += 1;
        const input = {
          deviceId: p.report.deviceId,
          accountId: w.accountId,
          attributionId: attribution.get(p.report.deviceId)!,
          at: p.report.at,
          values: p.report.values,
          counters: p.counters,
        };
        hourly.add(input);
        daily.add(input);
        recorded.push({
          accountId: w.accountId,
          deviceId: p.report.deviceId,
          serial: p.report.serial,
          at: p.report.at,
          values: p.report.values,
        });
      }
      await writeBatch(trx, {
        hourly: hourly.list(),
        daily: daily.list(),
        fleetDaily: daily.fleetDaily(),
        fleetTags: daily.fleetTags((deviceId) => states.get(deviceId)?.tags ?? {}),
        fleetGroups: daily.fleetGroups((deviceId) => {
          const s = states.get(deviceId)!;
          return { model: s.model, firmware: s.firmware ?? '', site: s.site_id ?? '' };
        }),
        states: [...work.values()].map((w) => ({
          ...w.state,
          counters: w.counters.counters,
          latest_at: w.counters.latestAt?.toISOString() ?? null,
        })),
      });
      if (this.withState.size > 200_000) this.withState.clear();
      for (const id of states.keys()) this.withState.add(id);
      return recorded;
    });
  }

  /** Each device's attribution id: what it is now (model, firmware, site). */
  private async attributionsOf(
    trx: Parameters<typeof attributionIds>[0],
    states: LockedState[],
  ): Promise<Map<string, number>> {
    const byDevice = new Map<string, number>();
    const missing = new Map<string, { deviceIds: string[]; item: Parameters<typeof attributionIds>[1][number] }>();
    for (const s of states) {
      const what = JSON.stringify([s.model, s.firmware, s.site_id]);
      let fingerprint = this.fingerprints.get(what);
      if (fingerprint === undefined) {
        fingerprint = createHash('sha256').update(what).digest('base64url');
        if (this.fingerprints.size > 10_000) this.fingerprints.clear();
        this.fingerprints.set(what, fingerprint);
      }
      const key = `${s.account_id}|${fingerprint}`;
      const id = this.attributions.get(key);
      if (id !== undefined) byDevice.set(s.device_id, id);
      else {
        const entry = missing.get(key) ?? {
          deviceIds: [],
          item: { account_id: s.account_id, model: s.model, firmware: s.firmware, site_id: s.site_id, fingerprint },
        };
        entry.deviceIds.push(s.device_id);
        missing.set(key, entry);
      }
    }
    if (missing.size) {
      const rows = await attributionIds(
        trx,
        [...missing.values()].map((m) => m.item),
      );
      if (this.attributions.size > 10_000) this.attributions.clear();
      for (const row of rows) {
        const key = `${row.account_id}|${row.fingerprint}`;
        this.attributions.set(key, Number(row.id));
        for (const deviceId of missing.get(key)?.deviceIds ?? []) byDevice.set(deviceId, Number(row.id));
      }
    }
    return byDevice;
  }
}

interface DeviceWork {
  accountId: string;
  counters: LuminaireCounters;
  state: Omit<StateRow, 'counters' | 'latest_at'>;
}

function startWork(s: LockedState): DeviceWork {
  return {
    accountId: s.account_id,
    counters: { latestAt: s.latest_at ? new Date(s.latest_at) : null, counters: s.counters },
    state: {
      device_id: s.device_id,
      latest: { ...s.latest },
      counter_resets: s.counter_resets,
      points: Number(s.points),
      bad_clock_count: Number(s.bad_clock_count),
      last_bad_clock_at: s.last_bad_clock_at ? new Date(s.last_bad_clock_at).toISOString() : null,
      refused_fields: { ...s.refused_fields },
    },
  };
}

/** Refused fields per device: how many, and the last one's reason, value and time. */
function noteRefusals(state: DeviceWork['state'], report: LuminaireReport): void {
  for (const r of report.refused) {
    const before = state.refused_fields[r.field] as { count?: number } | undefined;
    state.refused_fields[r.field] = {
      count: (before?.count ?? 0) + 1,
      reason: r.reason,
      value: r.value,
      at: report.at.toISOString(),
    };
  }
}
