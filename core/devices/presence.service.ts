import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { appendEvents } from '../events/outbox';
import {
  firmwareReports,
  presenceRecords,
  type FirmwareReport,
  type OfflineReason,
  type PresenceChange,
  type PresenceRow,
} from './presence-changes';
import { appendDeviceEvents } from './store/history.store';
import {
  applyPresenceBatch,
  markOnlineDevicesOffline,
  sweepPresenceDeadlines,
  RESTART_PAGE,
} from './store/presence.store';

export type { FirmwareReport, OfflineReason, PresenceRow } from './presence-changes';

/**
 * Device presence and telemetry persistence: the heartbeat ingest hands it coalesced batches
 * and it writes each batch with ONE statement (presence.store.ts), then the history rows and
 * outbox events of every status or firmware change in the same transaction.
 */
export class PresenceService {
  constructor(
    private readonly deps: ServiceDeps,
    /** Written to `devices.broker_node` of devices that connect to this process. */
    private readonly nodeId: string,
  ) {}

  /** Persists one batch; returns firmware reports for the OTA engine (call it after commit). */
  async applyBatch(rows: PresenceRow[]): Promise<FirmwareReport[]> {
    if (rows.length === 0) return [];
    // A stable lock order (by id) keeps two concurrent writers of the same rows from deadlocking.
    rows.sort((a, b) => (a.deviceId < b.deviceId ? -1 : a.deviceId > b.deviceId ? 1 : 0));
    const now = this.deps.clock.now();
    return this.deps.transaction(async (trx) => {
      const changes = await applyPresenceBatch(trx, { nodeId: this.nodeId, now, rows });
      const reasons = new Map(rows.map((r) => [r.deviceId, r.offlineReason]));
      await this.recordChanges(trx, changes, (id) => reasons.get(id) ?? null);
      return firmwareReports(changes);
    });
  }

  /**
   * Marks offline every online device whose presence deadline passed (3 of its heartbeat
   * intervals without news). `examined` counts the devices marked offline and those whose
   * deadline only moved (callers go on while a whole page was examined).
   */
  async sweepTimedOut(limit = 5000): Promise<{ offline: number; examined: number }> {
    const now = this.deps.clock.now();
    return this.deps.transaction(async (trx) => {
      const { offline, examined } = await sweepPresenceDeadlines(trx, { now, limit });
      await this.recordChanges(trx, offline, () => 'heartbeat_timeout');
      return { offline: offline.length, examined };
    });
  }

  /**
   * At start: devices this process (or, without a broker node recorded, any single process)
   * believed online cannot still be connected to it, so they are marked offline with history
   * and events. `nodeIds` null = single-process mode: every online device.
   */
  async reconcileAfterRestart(input: { onlyNodes: string[] | null }): Promise<number> {
    const now = this.deps.clock.now();
    let total = 0;
    for (;;) {
      const changed = await this.deps.transaction(async (trx) => {
        const changes = await markOnlineDevicesOffline(trx, { now, onlyNodes: input.onlyNodes });
        await this.recordChanges(trx, changes, () => 'service_restart');
        return changes.length;
      });
      total += changed;
      if (changed < RESTART_PAGE) return total;
    }
  }

  /** History rows and outbox events for every status and firmware change of a batch. */
  private async recordChanges(
    trx: Knex.Transaction,
    changes: PresenceChange[],
    reasonOf: (deviceId: string) => OfflineReason | null,
  ): Promise<void> {
    const { history, events } = presenceRecords(changes, reasonOf);
    await appendDeviceEvents(trx, { now: this.deps.clock.now(), events: history });
    await appendEvents(trx, this.deps.clock, events);
  }
}
