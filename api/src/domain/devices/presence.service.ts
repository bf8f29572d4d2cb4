import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { appendDeviceEvents, type NewDeviceEvent } from './device-history';
import { appendEvents } from '../../events/outbox';
import type { NewEvent } from '../../events/event-types';
import type { Connectivity } from './device-types';

/** Why a device went offline (history and event data; stable strings). */
export type OfflineReason = 'disconnected' | 'last_will' | 'keepalive_timeout' | 'status_offline' | 'heartbeat_timeout' | 'service_restart' | 'shutdown' | 'credentials_revoked';

/** One device's coalesced change since the last flush. */
export interface PresenceRow {
  deviceId: string;
  /** When the device was last heard (heartbeat, status or connect); null = no news. */
  seenAt: Date | null;
  firmware: string | null;
  firmwareKey: string | null;
  ip: string | null;
  uptimeS: number | null;
  rssi: number | null;
  /** Connectivity to set; null = unchanged. */
  connectivity: Connectivity | null;
  /** Configuration version the device reported applied (`config/reported`); null = none. */
  reportedConfigVersion: number | null;
  offlineReason: OfflineReason | null;
}

/** A device whose firmware was reported (for the OTA engine), after commit. */
export interface FirmwareReport {
  accountId: string;
  deviceId: string;
  serial: string;
  firmware: string;
  previous: string | null;
}

interface ChangedRow {
  id: string;
  account_id: string;
  serial: string;
  prev_connectivity: string;
  prev_status: string;
  prev_firmware: string | null;
  connectivity: string;
  status: string;
  firmware: string | null;
  ip: string | null;
  last_seen: Date | null;
  current_update_id: string | null;
  firmware_reported: boolean;
  prev_reported_config_version: number | null;
  reported_config_version: number | null;
}

/**
 * Device presence and telemetry persistence: the heartbeat ingest hands it coalesced batches
 * and it writes each batch with ONE `UPDATE devices ... FROM unnest(...)` statement, then the
 * history rows and outbox events of every status or firmware change in the same transaction.
 * Status: `offline` when disconnected; while connected `updating` if an update is in progress
 * (`current_update_id`, set by the OTA engine), else `online`. Applied configuration reports
 * ride in the same statement (a reconnect storm of 10,000 devices also reports 10,000 configs).
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
      const result = await trx.raw<{ rows: ChangedRow[] }>(
        `WITH written AS (
         UPDATE devices d SET
           connectivity = COALESCE(u.connectivity, d.connectivity),
           status = CASE WHEN COALESCE(u.connectivity, d.connectivity) = 'offline' THEN 'offline'
                         WHEN d.current_update_id IS NOT NULL THEN 'updating' ELSE 'online' END,
           last_seen = COALESCE(u.seen_at, d.last_seen),
           -- A lower bound of the exact deadline (last_seen + 3 intervals), moved only by a whole
           -- interval or more (or earlier, when the interval shrank): between those writes a flush
           -- changes no indexed column and PostgreSQL updates the row in place (HOT, no index
           -- entries). The sweep checks last_seen before it marks anyone offline.
           offline_after = CASE WHEN u.deadline IS NOT NULL AND (
                                  d.offline_after IS NULL
                                  OR u.deadline < d.offline_after
                                  OR u.deadline - make_interval(secs => d.heartbeat_interval_s) >= d.offline_after)
                                THEN u.deadline
                                ELSE d.offline_after END,
           firmware = COALESCE(u.firmware, d.firmware),
           firmware_key = COALESCE(u.firmware_key, d.firmware_key),
           ip = COALESCE(u.ip, d.ip),
           uptime_s = COALESCE(u.uptime_s, d.uptime_s),
           rssi = COALESCE(u.rssi, d.rssi),
           broker_node = CASE WHEN u.connectivity = 'online' THEN ?::text ELSE d.broker_node END,
           -- Only the current desired version counts as applied: its content is the desired configuration.
           reported_config_version = CASE WHEN u.reported_version = d.desired_config_version THEN u.reported_version ELSE d.reported_config_version END,
           reported_config = CASE WHEN u.reported_version = d.desired_config_version THEN d.desired_config ELSE d.reported_config END,
           updated_at = CASE WHEN COALESCE(u.connectivity, d.connectivity) <> d.connectivity
                              OR u.firmware IS DISTINCT FROM d.firmware AND u.firmware IS NOT NULL THEN ?::timestamptz
                             ELSE d.updated_at END
         FROM (SELECT x.id, x.seen_at, x.firmware, x.firmware_key, x.ip, x.uptime_s, x.rssi, x.reported_version,
                      -- Cluster mode: a disconnect seen by this process is ignored once the device
                      -- has connected to another process (its row names that process).
                      CASE WHEN x.connectivity = 'offline' AND old.broker_node IS DISTINCT FROM ?::text
                           THEN NULL ELSE x.connectivity END AS connectivity,
                      old.connectivity AS prev_connectivity, old.status AS prev_status, old.firmware AS prev_firmware,
                      old.reported_config_version AS prev_reported_config_version,
                      -- The exact presence deadline this news gives (null without a sighting).
                      x.seen_at + make_interval(secs => old.heartbeat_interval_s * 3) AS deadline
               FROM unnest(?::uuid[], ?::timestamptz[], ?::text[], ?::text[], ?::text[], ?::int[], ?::int[], ?::text[], ?::int[])
                      AS x(id, seen_at, firmware, firmware_key, ip, uptime_s, rssi, connectivity, reported_version)
               JOIN devices old ON old.id = x.id) u
         WHERE d.id = u.id
         RETURNING d.id, d.account_id, d.serial, u.prev_connectivity, u.prev_status,
                   u.prev_firmware, d.connectivity, d.status, d.firmware, d.ip, d.last_seen,
                   d.current_update_id, (u.firmware IS NOT NULL) AS firmware_reported,
                   u.prev_reported_config_version, d.reported_config_version)
         -- Only what changed comes back: a steady heartbeat (nearly every row) is not sent to Node.
         SELECT * FROM written
          WHERE status <> prev_status OR connectivity <> prev_connectivity
             OR (firmware_reported AND (firmware IS DISTINCT FROM prev_firmware OR current_update_id IS NOT NULL))
             OR reported_config_version IS DISTINCT FROM prev_reported_config_version`,
        // knex's RawBinding typing does not admit arrays of nullable values; pg serializes them.
        [
          this.nodeId,
          now,
          this.nodeId,
          rows.map((r) => r.deviceId),
          rows.map((r) => r.seenAt),
          rows.map((r) => r.firmware),
          rows.map((r) => r.firmwareKey),
          rows.map((r) => r.ip),
          rows.map((r) => r.uptimeS),
          rows.map((r) => r.rssi),
          rows.map((r) => r.connectivity),
          rows.map((r) => r.reportedConfigVersion),
        ] as unknown as readonly string[],
      );
      const reasons = new Map(rows.map((r) => [r.deviceId, r.offlineReason]));
      await this.recordChanges(trx, result.rows, (id) => reasons.get(id) ?? null);
      return result.rows
        .filter((r) => r.firmware_reported && r.firmware && (r.firmware !== r.prev_firmware || r.current_update_id))
        .map((r) => ({ accountId: r.account_id, deviceId: r.id, serial: r.serial, firmware: r.firmware!, previous: r.prev_firmware }));
    });
  }

  /**
   * Marks offline every online device whose presence deadline passed (3 of its heartbeat
   * intervals without news). One indexed range scan on `devices_online_offline_after`; since
   * that column is a lower bound (see applyBatch), each candidate's exact deadline is checked
   * against `last_seen`, and one still alive gets its exact deadline instead. `examined` counts
   * both kinds (callers go on while a whole page was examined).
   */
  async sweepTimedOut(limit = 5000): Promise<{ offline: number; examined: number }> {
    const now = this.deps.clock.now();
    return this.deps.transaction(async (trx) => {
      const result = await trx.raw<{ rows: Array<ChangedRow & { expired: boolean }> }>(
        `UPDATE devices d SET
           connectivity = CASE WHEN old.expired THEN 'offline' ELSE d.connectivity END,
           status = CASE WHEN old.expired THEN 'offline' ELSE d.status END,
           updated_at = CASE WHEN old.expired THEN ?::timestamptz ELSE d.updated_at END,
           offline_after = CASE WHEN old.expired THEN d.offline_after ELSE old.deadline END
         FROM (SELECT c.*, c.deadline IS NULL OR c.deadline < ?::timestamptz AS expired
                 FROM (SELECT id, status, connectivity, firmware, last_seen + make_interval(secs => heartbeat_interval_s * 3) AS deadline
                         FROM devices
                        WHERE connectivity = 'online' AND offline_after < ?::timestamptz
                        ORDER BY offline_after LIMIT ? FOR UPDATE SKIP LOCKED) c) old
         WHERE d.id = old.id
         RETURNING d.id, d.account_id, d.serial, old.connectivity AS prev_connectivity, old.status AS prev_status,
                   old.firmware AS prev_firmware, d.connectivity, d.status, d.firmware, d.ip, d.last_seen,
                   d.current_update_id, false AS firmware_reported,
                   d.reported_config_version AS prev_reported_config_version, d.reported_config_version, old.expired`,
        [now, now, now, limit],
      );
      const offline = result.rows.filter((r) => r.expired);
      await this.recordChanges(trx, offline, () => 'heartbeat_timeout');
      return { offline: offline.length, examined: result.rows.length };
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
        const filter = input.onlyNodes ? 'AND broker_node = ANY(?::text[])' : '';
        const result = await trx.raw<{ rows: ChangedRow[] }>(
          `UPDATE devices d SET connectivity = 'offline', status = 'offline', updated_at = ?::timestamptz
           FROM (SELECT id, status, connectivity, firmware FROM devices
                 WHERE connectivity = 'online' ${filter} ORDER BY id LIMIT 5000 FOR UPDATE) old
           WHERE d.id = old.id
           RETURNING d.id, d.account_id, d.serial, old.connectivity AS prev_connectivity, old.status AS prev_status,
                     old.firmware AS prev_firmware, d.connectivity, d.status, d.firmware, d.ip, d.last_seen,
                     d.current_update_id, false AS firmware_reported,
                     d.reported_config_version AS prev_reported_config_version, d.reported_config_version`,
          input.onlyNodes ? [now, input.onlyNodes] : [now],
        );
        await this.recordChanges(trx, result.rows, () => 'service_restart');
        return result.rows.length;
      });
      total += changed;
      if (changed < 5000) return total;
    }
  }

  /** History rows and outbox events for every status and firmware change of a batch. */
  private async recordChanges(trx: Knex.Transaction, rows: ChangedRow[], reasonOf: (deviceId: string) => OfflineReason | null): Promise<void> {
    const history: NewDeviceEvent[] = [];
    const events: NewEvent[] = [];
    for (const r of rows) {
      if (r.status !== r.prev_status) {
        const reason = r.connectivity === 'offline' ? reasonOf(r.id) : null;
        history.push({ accountId: r.account_id, deviceId: r.id, type: 'status_changed', data: { from: r.prev_status, to: r.status, ...(reason ? { reason } : {}) } });
      }
      if (r.connectivity !== r.prev_connectivity) {
        const reason = r.connectivity === 'offline' ? reasonOf(r.id) : null;
        events.push({
          accountId: r.account_id,
          type: r.connectivity === 'online' ? 'device.online' : 'device.offline',
          subject: r.serial,
          data: {
            device_id: r.id,
            serial: r.serial,
            status: r.status,
            connectivity: r.connectivity,
            firmware: r.firmware,
            ip: r.ip,
            last_seen: r.last_seen ? new Date(r.last_seen).toISOString() : null,
            ...(reason ? { reason } : {}),
          },
        });
      }
      if (r.firmware_reported && r.firmware !== r.prev_firmware) {
        // No update in progress means nobody here changed it: a USB-C flash in an air-gapped site.
        const outside = r.prev_firmware !== null && r.current_update_id === null;
        history.push({
          accountId: r.account_id,
          deviceId: r.id,
          type: outside ? 'firmware_changed_outside_ota' : 'firmware_changed',
          data: { from: r.prev_firmware, to: r.firmware },
        });
      }
      if (r.reported_config_version !== null && r.reported_config_version !== r.prev_reported_config_version) {
        history.push({ accountId: r.account_id, deviceId: r.id, type: 'config_applied', data: { version: r.reported_config_version } });
        events.push({ accountId: r.account_id, type: 'device.config_applied', subject: r.serial, data: { device_id: r.id, serial: r.serial, version: r.reported_config_version } });
      }
    }
    await appendDeviceEvents(trx, this.deps.clock, history);
    await appendEvents(trx, this.deps.clock, events);
  }
}
