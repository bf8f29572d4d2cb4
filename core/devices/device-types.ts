import type { DeviceConfig } from './device-config';
import type { SiteRef } from '../sites/site-types';
import type { LastRefusedMessage, MessageRefusalCounts, RefusedFields } from './device-refusals';

/** A serial: 1 to 64 characters of A-Z a-z 0-9 . _ : - (docs/rest-devices.md). */
export const SERIAL_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;
export const isValidSerial = (value: unknown): value is string =>
  typeof value === 'string' && SERIAL_PATTERN.test(value);

/**
 * `online`: MQTT session up and heartbeats arriving; `offline`: disconnected, Last Will, or
 * 3 heartbeat intervals without one; `updating`: an OTA update is in progress (wins while
 * connected). Persisted values: never rename.
 */
export const DEVICE_STATUSES = ['online', 'offline', 'updating'] as const;
export type DeviceStatus = (typeof DEVICE_STATUSES)[number];
export type Connectivity = 'online' | 'offline';

/** Update states that are not final: at most one such row per device (unique partial index). */
export const ACTIVE_UPDATE_STATES = ['queued', 'sent', 'downloading', 'installing', 'rebooting'] as const;

/** The device's current OTA update, as shown on the device record. */
export interface DeviceUpdateSummary {
  jobId: string;
  deploymentId: string;
  state: string;
  progress: number;
  fromVersion: string | null;
  targetVersion: string;
  error: string | null;
  stateChangedAt: string;
}

export interface DeviceConfiguration {
  desired: DeviceConfig;
  desiredVersion: number;
  reported: DeviceConfig | null;
  reportedVersion: number | null;
  /** The device reported the desired version. */
  inSync: boolean;
}

/** A device as the services return it (adapters present it in their own wire format). */
export interface Device {
  id: string;
  serial: string;
  name: string;
  model: string;
  /** Installed version as last reported; null until the device reports. */
  firmware: string | null;
  status: DeviceStatus;
  connectivity: Connectivity;
  /** ISO 8601 UTC time of the last heartbeat (a connection or status message does not move it); null until the first. */
  lastSeen: string | null;
  ip: string | null;
  uptimeS: number | null;
  rssi: number | null;
  tags: Record<string, string>;
  config: DeviceConfiguration;
  update: DeviceUpdateSummary | null;
  claimedAt: string;
  /**
   * The last firmware value the device reported outside the version grammar, as sent; null when
   * its last firmware report was valid (or it never sent an invalid one). `firmware` keeps the
   * last valid version meanwhile.
   */
  firmwareReportedInvalid: string | null;
  /** Messages of the device the service dropped since its claim, by reason. */
  refusedMessages: MessageRefusalCounts;
  lastRefusedMessage: LastRefusedMessage | null;
  /** Heartbeat fields refused since the claim (the rest of each heartbeat was recorded). */
  refusedFields: RefusedFields;
  /** The site (building) the device is assigned to; null when none. */
  site: SiteRef | null;
}

/** MQTT credentials, returned once (claim, rotation); only their SHA-256 is stored. */
export interface DeviceCredentials {
  serial: string;
  username: string;
  password: string;
}

export interface DeviceHistoryEntry {
  id: number;
  type: string;
  occurredAt: string;
  data: Record<string, unknown>;
}

/** What authenticating a connection reads of a claimed device. */
export interface DeviceIdentity {
  id: string;
  accountId: string;
  serial: string;
  /** Desired configuration to (re)publish retained on connect when version > 0. */
  desiredConfigVersion: number;
  desiredConfig: Record<string, unknown>;
}
