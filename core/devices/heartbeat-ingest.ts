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

  /**
   * A fleet runs a handful of versions: their sortable keys are remembered instead of parsed
   * again for every heartbeat (bounded: cleared when it would hold more than 1,000).
   */
  private readonly versionKeys = new Map<string, string>();

  private keyOf(version: string): string {
    let key = this.versionKeys.get(version);
    if (key === undefined) {
      if (this.versionKeys.size >= 1000) this.versionKeys.clear();
      key = versionKey(version);
      this.versionKeys.set(version, key);
    }
    return key;
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
      row.firmwareKey = this.keyOf(values.firmware);
      row.firmwareInvalid = null;
    }
    if (refused.length > 0) {
      addFieldRefusals(this.refusalsOf(row), refused, now);
      const firmware = refused.find((r) => r.field === 'firmware');
      if (firmware) row.firmwareInvalid = firmware.value;
    }
    if (values.ip !== undefined) row.ip = values.ip;
    if (values.uptime_s !== undefined) row.uptimeS = values.uptime_s;
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
    this.flushing = this.write(batch).finally(() => {
      this.flushing = null;
    });
    await this.flushing;
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
