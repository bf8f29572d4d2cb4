import { sqlList } from '../../shared/sql-list';
import type { DeviceConfig } from '../device-config';
import { ACTIVE_UPDATE_STATES, type Device, type DeviceStatus, type Connectivity } from '../device-types';
import type { LastRefusedMessage, MessageRefusalCounts, RefusedFields } from '../device-refusals';

/**
 * The device record as every store reads it: one statement that joins the model name and the
 * current update, so a page of 100 costs one round trip. Shared by the stores of this folder
 * only; services get `Device`s.
 */

/**
 * Timestamps leave PostgreSQL already in the wire format (the same text as Date#toISOString),
 * which spares parsing and re-formatting three dates per row on lists of 100,000.
 */
export const isoUtc = (column: string): string =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

// `a` is the device's unfinished update (unique partial index device_updates_one_active);
// `c` the one devices.current_update_id points at (the OTA engine may keep the last finished one).
export const SELECT_DEVICE = `
SELECT d.id, d.serial, d.name, m.name AS model, d.firmware, d.status, d.connectivity, ${isoUtc('d.last_seen')} AS last_seen, d.ip,
       d.uptime_s, d.rssi, d.tags, d.desired_config, d.desired_config_version, d.reported_config,
       d.reported_config_version, ${isoUtc('d.claimed_at')} AS claimed_at,
       d.firmware_reported_invalid, d.refused_messages, d.last_refused_message, d.refused_fields,
       d.site_id, st.name AS site_name,
       COALESCE(a.id, c.id) AS u_id, COALESCE(a.deployment_id, c.deployment_id) AS u_deployment_id,
       COALESCE(a.state, c.state) AS u_state, COALESCE(a.progress, c.progress) AS u_progress,
       CASE WHEN a.id IS NOT NULL THEN a.from_version ELSE c.from_version END AS u_from_version,
       COALESCE(a.target_version, c.target_version) AS u_target_version,
       CASE WHEN a.id IS NOT NULL THEN a.error ELSE c.error END AS u_error,
       ${isoUtc('COALESCE(a.state_changed_at, c.state_changed_at)')} AS u_state_changed_at
  FROM devices d
  JOIN models m ON m.id = d.model_id
  LEFT JOIN sites st ON st.id = d.site_id
  LEFT JOIN device_updates a ON a.device_id = d.id AND a.state IN (${sqlList(ACTIVE_UPDATE_STATES)})
  LEFT JOIN device_updates c ON c.id = d.current_update_id`;

/** A row of SELECT_DEVICE. */
export interface DeviceRow {
  id: string;
  serial: string;
  name: string;
  model: string;
  firmware: string | null;
  status: DeviceStatus;
  connectivity: Connectivity;
  last_seen: string | null;
  ip: string | null;
  uptime_s: number | null;
  rssi: number | null;
  tags: Record<string, string>;
  desired_config: DeviceConfig;
  desired_config_version: number;
  reported_config: DeviceConfig | null;
  reported_config_version: number | null;
  claimed_at: string;
  firmware_reported_invalid: string | null;
  refused_messages: MessageRefusalCounts;
  last_refused_message: LastRefusedMessage | null;
  refused_fields: RefusedFields;
  site_id: string | null;
  site_name: string | null;
  u_id: string | null;
  u_deployment_id: string | null;
  u_state: string | null;
  u_progress: number | null;
  u_from_version: string | null;
  u_target_version: string | null;
  u_error: string | null;
  u_state_changed_at: string | null;
}

export function toDevice(row: DeviceRow): Device {
  return {
    id: row.id,
    serial: row.serial,
    name: row.name,
    model: row.model,
    firmware: row.firmware,
    status: row.status,
    connectivity: row.connectivity,
    lastSeen: row.last_seen,
    ip: row.ip,
    uptimeS: row.uptime_s,
    rssi: row.rssi,
    tags: row.tags,
    config: {
      desired: row.desired_config,
      desiredVersion: row.desired_config_version,
      reported: row.reported_config,
      reportedVersion: row.reported_config_version,
      inSync: row.reported_config_version !== null && row.reported_config_version === row.desired_config_version,
    },
    update:
      row.u_id === null
        ? null
        : {
            jobId: row.u_id,
            deploymentId: row.u_deployment_id!,
            state: row.u_state!,
            progress: row.u_progress ?? 0,
            fromVersion: row.u_from_version,
            targetVersion: row.u_target_version!,
            error: row.u_error,
            stateChangedAt: row.u_state_changed_at!,
          },
    claimedAt: row.claimed_at,
    firmwareReportedInvalid: row.firmware_reported_invalid,
    refusedMessages: row.refused_messages,
    lastRefusedMessage: row.last_refused_message,
    refusedFields: row.refused_fields,
    site: row.site_id === null ? null : { id: row.site_id, name: row.site_name ?? '' },
  };
}
