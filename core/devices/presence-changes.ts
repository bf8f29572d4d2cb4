import type { NewEvent } from '../events/event-types';
import type { NewDeviceEvent } from './device-history';
import type { Connectivity, DeviceStatus } from './device-types';
import type { PendingRefusals } from './device-refusals';

/** Why a device went offline (history and event data; stable strings). */
export type OfflineReason =
  | 'disconnected'
  | 'last_will'
  | 'keepalive_timeout'
  | 'status_offline'
  | 'heartbeat_timeout'
  | 'service_restart'
  | 'shutdown'
  | 'credentials_revoked';

/** One device's coalesced change since the last flush. */
export interface PresenceRow {
  deviceId: string;
  /** When the device sent its last heartbeat (`last_seen`, the specification's field); null = no news. */
  seenAt: Date | null;
  /**
   * When the device was last heard: a connection, a heartbeat or a status `online` (`heard_at`,
   * the presence clock every deadline uses); null = no news.
   */
  heardAt: Date | null;
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
  /**
   * A firmware value outside the version grammar, as sent (`firmware` stays the last valid one);
   * null = no news. A valid `firmware` in the same row that came later cleared it.
   */
  firmwareInvalid?: string | null;
  /** Messages and heartbeat fields refused since the last flush (added to the device's counts). */
  refusals?: PendingRefusals | null;
  /**
   * The first `uptime_s` of this row: the write compares it with the stored one (a lower value is
   * a reboot), while `uptimeS` holds the last. Absent or null: no uptime in this row.
   */
  firstUptimeS?: number | null;
  /** Times `uptime_s` went down between the heartbeats coalesced in this row (reboots between flushes). */
  uptimeDrops?: number;
  /** MQTT sessions the device opened since the last flush (a status `online` is not one). */
  connects?: number;
}

/** A device whose firmware was reported (for the OTA engine), after commit. */
export interface FirmwareReport {
  accountId: string;
  deviceId: string;
  serial: string;
  firmware: string;
  previous: string | null;
}

/** A device row a presence write changed: its values before and after. */
export interface PresenceChange {
  deviceId: string;
  accountId: string;
  serial: string;
  prevConnectivity: Connectivity;
  prevStatus: DeviceStatus;
  prevFirmware: string | null;
  connectivity: Connectivity;
  status: DeviceStatus;
  firmware: string | null;
  ip: string | null;
  lastSeen: Date | null;
  currentUpdateId: string | null;
  /** The batch carried a firmware version for this device (the same one or another). */
  firmwareReported: boolean;
  prevReportedConfigVersion: number | null;
  reportedConfigVersion: number | null;
}

/**
 * History rows and outbox events for the changes of one presence write: a status change is
 * history, a connectivity change an event (`device.online` / `device.offline`, with the reason
 * when offline), a firmware change history (`firmware_changed_outside_ota` when no update is in
 * progress and a firmware was known before), an applied configuration both.
 */
export function presenceRecords(
  changes: PresenceChange[],
  reasonOf: (deviceId: string) => OfflineReason | null,
): { history: NewDeviceEvent[]; events: NewEvent[] } {
  const history: NewDeviceEvent[] = [];
  const events: NewEvent[] = [];
  for (const r of changes) {
    if (r.status !== r.prevStatus) {
      const reason = r.connectivity === 'offline' ? reasonOf(r.deviceId) : null;
      history.push({
        accountId: r.accountId,
        deviceId: r.deviceId,
        type: 'status_changed',
        data: { from: r.prevStatus, to: r.status, ...(reason ? { reason } : {}) },
      });
    }
    if (r.connectivity !== r.prevConnectivity) {
      const reason = r.connectivity === 'offline' ? reasonOf(r.deviceId) : null;
      events.push({
        accountId: r.accountId,
        type: r.connectivity === 'online' ? 'device.online' : 'device.offline',
        subject: r.serial,
        data: {
          device_id: r.deviceId,
          serial: r.serial,
          status: r.status,
          connectivity: r.connectivity,
          firmware: r.firmware,
          ip: r.ip,
          last_seen: r.lastSeen ? new Date(r.lastSeen).toISOString() : null,
          ...(reason ? { reason } : {}),
        },
      });
    }
    if (r.firmwareReported && r.firmware !== r.prevFirmware) {
      // No update in progress means nobody here changed it: a USB-C flash in an air-gapped site.
      const outside = r.prevFirmware !== null && r.currentUpdateId === null;
      history.push({
        accountId: r.accountId,
        deviceId: r.deviceId,
        type: outside ? 'firmware_changed_outside_ota' : 'firmware_changed',
        data: { from: r.prevFirmware, to: r.firmware },
      });
    }
    if (r.reportedConfigVersion !== null && r.reportedConfigVersion !== r.prevReportedConfigVersion) {
      history.push({
        accountId: r.accountId,
        deviceId: r.deviceId,
        type: 'config_applied',
        data: { version: r.reportedConfigVersion },
      });
      events.push({
        accountId: r.accountId,
        type: 'device.config_applied',
        subject: r.serial,
        data: { device_id: r.deviceId, serial: r.serial, version: r.reportedConfigVersion },
      });
    }
  }
  return { history, events };
}

/**
 * What the OTA engine is told after a batch commits: devices that reported a firmware that
 * differs from the one before, or any firmware while an update is in progress (the report may
 * complete it).
 */
export function firmwareReports(changes: PresenceChange[]): FirmwareReport[] {
  return changes
    .filter((r) => r.firmwareReported && r.firmware && (r.firmware !== r.prevFirmware || r.currentUpdateId))
    .map((r) => ({
      accountId: r.accountId,
      deviceId: r.deviceId,
      serial: r.serial,
      firmware: r.firmware!,
      previous: r.prevFirmware,
    }));
}
