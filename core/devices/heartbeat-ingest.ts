import type { Logger } from '../logger';
import type { Clock } from '../shared/clock';
import { versionKey } from '../shared/version';
import type { PresenceService, PresenceRow, OfflineReason, FirmwareReport } from './presence.service';
import type { RefusedField } from '#protocol/heartbeat-fields';
import {
  addFieldRefusals,
  addMessageRefusal,
  mergePendingRefusals,
  noPendingRefusals,
  type MessageRefusalReason,
  type PendingRefusals,
} from './device-refusals';

/** What a heartbeat reported; an absent field is no news (the device keeps its last value). */
export interface HeartbeatValues {
  firmware?: string | undefined;
  ip?: string | undefined;
  uptime_s?: number | undefined;
  rssi?: number | undefined;
}

export interface HeartbeatIngestOptions {
  presence: PresenceService;
  clock: Clock;
  logger: Logger;
  /** Flush period (ms). At most 1000 by contract; default 200. */
  flushIntervalMs?: number;
  /** Called after each committed flush with devices whose firmware changed or that are updating. */
  onFirmwareReported?: (reports: FirmwareReport[]) => void;
  /** Rows written per flush, and how long one took (metrics). */
  onFlushed?: (info: { rows: number; ms: number }) => void;
}

/** Devices written per statement (see HeartbeatIngest.writeInChunks). */
export const MAX_FLUSH_ROWS = 1000;

/**
 * Coalesces device news in memory (one entry per device: the latest heartbeat values and the
 * latest connectivity) and writes it in batches: one statement per flush, at least every
 * second, and once more on stop. A failed flush (database down) merges its rows back under
 * newer news, so the buffer stays bounded by the number of devices, never by the message rate.
 */
export class HeartbeatIngest {
  private pending = new Map<string, PresenceRow>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | null = null;
  private readonly intervalMs: number;

  constructor(private readonly options: HeartbeatIngestOptions) {
    this.intervalMs = Math.min(options.flushIntervalMs ?? 200, 1000);
  }

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.intervalMs);
    this.timer.unref();
  }

  /** Devices with unwritten news. */
  get backlog(): number {
    return this.pending.size;
  }

  /**
   * A heartbeat: the device is heard whatever its fields said, and `last_seen` moves (it is the
   * time of the last heartbeat). `values` holds the valid fields, `refused` the others (counted
   * per device; a refused `firmware` marks the device as not having reported a valid version,
   * until it does).
   */
  heartbeat(deviceId: string, values: HeartbeatValues, refused: RefusedField[] = []): void {
    const row = this.row(deviceId);
    const now = this.options.clock.now();
    row.seenAt = now;
    row.heardAt = now;
    if (values.firmware !== undefined) {
      row.firmware = values.firmware;
      row.firmwareKey = versionKey(values.firmware);
      row.firmwareInvalid = null;
    }
    if (refused.length > 0) {
      addFieldRefusals(this.refusalsOf(row), refused, now);
      const firmware = refused.find((r) => r.field === 'firmware');
      if (firmware) row.firmwareInvalid = firmware.value;
    }
    if (values.ip !== undefined) row.ip = values.ip;
    if (values.uptime_s !== undefined) {
      // Reboots are judged against the stored uptime by the batched write (presence.store.ts);
      // only a drop between two heartbeats of the same batch is counted here, from what is in memory.
      if (row.uptimeS !== null && values.uptime_s < row.uptimeS) row.uptimeDrops = (row.uptimeDrops ?? 0) + 1;
      row.firstUptimeS ??= values.uptime_s;
      row.uptimeS = values.uptime_s;
    }
    if (values.rssi !== undefined) row.rssi = values.rssi;
    // A message proves the session is up, whatever happened before in this window.
    row.connectivity = 'online';
    row.offlineReason = null;
  }

  /** A message of the device was dropped (counted per device, written with the next batch). */
  messageRefused(deviceId: string, input: { reason: MessageRefusalReason; topic: string }): void {
    addMessageRefusal(this.refusalsOf(this.row(deviceId)), { ...input, at: this.options.clock.now() });
  }

  private refusalsOf(row: PresenceRow): PendingRefusals {
    return (row.refusals ??= noPendingRefusals());
  }

  /**
   * A connection or a status `online`: the device is heard and online, but `last_seen` (the time
   * of the last heartbeat) stays where it was.
   */
  connected(deviceId: string): void {
    const row = this.row(deviceId);
    row.heardAt = this.options.clock.now();
    row.connectivity = 'online';
    row.offlineReason = null;
  }

  /** An MQTT session of the device started: it is heard (as `connected`) and the connection counts as a reconnect (docs/fixture-health.md). */
  sessionStarted(deviceId: string): void {
    this.connected(deviceId);
    const row = this.row(deviceId);
    row.connects = (row.connects ?? 0) + 1;
  }

  /** The device applied configuration `version` (`config/reported`). */
  configReported(deviceId: string, version: number): void {
    this.row(deviceId).reportedConfigVersion = version;
  }

  offline(deviceId: string, reason: OfflineReason): void {
    const row = this.row(deviceId);
    // The first reason wins: a Last Will is followed by the disconnect that caused it.
    if (row.connectivity !== 'offline') row.offlineReason = reason;
    row.connectivity = 'offline';
  }

  /** Writes everything pending now; concurrent callers share the flush under way, then run another. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    this.flushing = this.writeInChunks(batch).finally(() => {
      this.flushing = null;
    });
    await this.flushing;
  }

  /**
   * A batch of at most MAX_FLUSH_ROWS devices per statement: the event loop's share of a write
   * (its parameters, and the changes it returns with their history and events) grows with the
   * batch, and a fleet reconnecting at once puts every device in one (profile of
   * bench/heartbeat-capacity.bench.ts: a 5,000-device batch held the loop for tens of ms). Each
   * chunk commits on its own, and a failed one goes back to pending by itself (write).
   */
  private async writeInChunks(batch: Map<string, PresenceRow>): Promise<void> {
    if (batch.size <= MAX_FLUSH_ROWS) {
      await this.write(batch);
      return;
    }
    let chunk = new Map<string, PresenceRow>();
    for (const [id, row] of batch) {
      chunk.set(id, row);
      if (chunk.size === MAX_FLUSH_ROWS) {
        await this.write(chunk);
        chunk = new Map();
      }
    }
    if (chunk.size > 0) await this.write(chunk);
  }

  /** Stops the timer and writes what is left. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private async write(batch: Map<string, PresenceRow>): Promise<void> {
    const started = performance.now();
    try {
      const reports = await this.options.presence.applyBatch([...batch.values()]);
      this.options.onFlushed?.({ rows: batch.size, ms: performance.now() - started });
      if (reports.length) this.options.onFirmwareReported?.(reports);
    } catch (error) {
      this.options.logger.error({ err: error, rows: batch.size }, 'heartbeat flush failed; will retry');
      // Keep the data: newer news (already in this.pending) wins field by field.
      for (const [id, old] of batch) {
        const newer = this.pending.get(id);
        this.pending.set(id, newer ? mergeRows(old, newer) : old);
      }
    }
  }

  private row(deviceId: string): PresenceRow {
    let row = this.pending.get(deviceId);
    if (!row) {
      row = {
        deviceId,
        seenAt: null,
        heardAt: null,
        firmware: null,
        firmwareKey: null,
        ip: null,
        uptimeS: null,
        rssi: null,
        connectivity: null,
        offlineReason: null,
        reportedConfigVersion: null,
        firmwareInvalid: null,
        refusals: null,
      };
      this.pending.set(deviceId, row);
    }
    return row;
  }
}

function mergeRows(older: PresenceRow, newer: PresenceRow): PresenceRow {
  return {
    deviceId: newer.deviceId,
    seenAt: newer.seenAt ?? older.seenAt,
    heardAt: newer.heardAt ?? older.heardAt,
    firmware: newer.firmware ?? older.firmware,
    firmwareKey: newer.firmwareKey ?? older.firmwareKey,
    ip: newer.ip ?? older.ip,
    uptimeS: newer.uptimeS ?? older.uptimeS,
    firstUptimeS: older.firstUptimeS ?? newer.firstUptimeS ?? null,
    uptimeDrops:
      (older.uptimeDrops ?? 0) +
      (newer.uptimeDrops ?? 0) +
      (older.uptimeS !== null && newer.firstUptimeS != null && newer.firstUptimeS < older.uptimeS ? 1 : 0),
    connects: (older.connects ?? 0) + (newer.connects ?? 0),
    rssi: newer.rssi ?? older.rssi,
    connectivity: newer.connectivity ?? older.connectivity,
    offlineReason: newer.connectivity ? newer.offlineReason : older.offlineReason,
    reportedConfigVersion: newer.reportedConfigVersion ?? older.reportedConfigVersion,
    // A valid firmware in the newer row cleared an invalid one of the older.
    firmwareInvalid: newer.firmwareInvalid ?? (newer.firmware !== null ? null : (older.firmwareInvalid ?? null)),
    refusals:
      older.refusals && newer.refusals
        ? mergePendingRefusals(older.refusals, newer.refusals)
        : (newer.refusals ?? older.refusals ?? null),
  };
}
