import type { Logger } from '#core/logger';
import type { Metrics } from '#core/metrics';
import type { OtaDeviceListener } from '#core/devices/device-gateway';
import type { DeviceAuthService } from '#core/devices/device-auth.service';
import type { DeviceRotations } from '#core/devices/credential-rotation.service';
import type { PresenceService } from '#core/devices/presence.service';
import type { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import type { DisconnectRequests } from '#core/devices/disconnect-requests';
import type { LuminaireSink } from './handlers/context';
import type { DesiredConfig } from './config-delivery';

export interface DeviceBrokerOptions {
  metrics: Metrics;
  logger: Logger;
  /**
   * How requests to close a device's session reach every process (Redis in cluster mode). The
   * broker asks through it (`disconnect`) and, once started, closes what it holds when asked.
   * Default: this process only.
   */
  disconnects?: DisconnectRequests;
  /** How often online devices past their presence deadline are marked offline (ms). Default 5000. */
  sweepIntervalMs?: number;
  /**
   * Cluster backends (mqemitter-redis, aedes-persistence-redis); in memory when absent.
   * `storedSessions` lists the client ids with stored subscriptions (checked at start); `close`
   * ends the store's connection once Aedes has closed.
   */
  backends?: { mq: unknown; persistence: unknown; storedSessions(): Promise<string[]>; close(): Promise<void> };
  /**
   * Single process: at start every device recorded online is marked offline (nobody can be
   * connected to a process that just started). In cluster mode other processes hold devices,
   * so this is off and the presence sweep settles what a dead process left behind.
   */
  reconcileAllOnStart?: boolean;
  /**
   * Longest keepalive served (seconds); a CONNECT asking 0 (none) or more is served this, so a
   * dead connection is closed after 1.5 x this of silence. Default KEEPALIVE_MAX_S (1200).
   */
  keepaliveMaxS?: number;
}

/**
 * The domain the broker serves devices with. The domain reaches devices through the broker (it
 * is built over it), so the broker gets this when it starts: no connection is taken before.
 */
export interface DeviceDomain {
  auth: Pick<DeviceAuthService, 'authenticate' | 'authenticateCertificate'>;
  presence: Pick<PresenceService, 'reconcileAfterRestart' | 'sweepTimedOut'>;
  /** Device news, written in batches; started and, after the last device went, flushed by the broker. */
  ingest: HeartbeatIngest;
  /** The OTA engine: ready and heard devices, progress reports (firmware reports come from the ingest). */
  otaListener: OtaDeviceListener;
  /**
   * The device's desired configuration now, sent once its connection subscribed. Absent: the
   * one its authentication read.
   */
  configs?: { desired(input: { accountId: string; deviceId: string }): Promise<DesiredConfig | null> };
  /**
   * Planned credential rotations: what to deliver on `credentials`, acks, CSRs, and rotations
   * whose grace ended (settled by the presence sweep). Absent: none are served.
   */
  rotations?: DeviceRotations;
  /** Luminaire readings (docs/luminaire-data.md). Absent: such messages are dropped as invalid. */
  luminaire?: LuminaireSink;
}
