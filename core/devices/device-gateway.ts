import type { UpdateLock } from '#protocol/lock-payloads';
import type { OtaErrorCode } from '#protocol/payloads';

/**
 * The seam between the domain and the MQTT broker, in both directions: services reach devices
 * through a `DeviceGateway` given to their constructors (the broker, or `NO_BROKER` in tools
 * that run none), and the broker tells the OTA engine about devices (`OtaDeviceListener`).
 */

/**
 * An OTA job for one device: what the broker sends on `devices/{serial}/ota` (the broker maps it
 * to the protocol's OtaCommand payload, the device contract).
 */
export interface OtaJob {
  jobId: string;
  version: string;
  /** The model the image is built for: a module of another model refuses it (`wrong_model`). */
  model: string;
  url: string;
  sha256: string;
  size: number;
  /** Versions uploaded signed: base64 Ed25519 signature over the image's SHA-256 digest, and the key that made it. */
  signature?: { value: string; keyId: string };
  /** A delta from the device's running version to this image (docs/ota.md "Delta images"). */
  delta?: { from: string; url: string; sha256: string; size: number; format: 'bsdiff40' };
}

export type OtaProgressState = 'downloading' | 'installing' | 'rebooting' | 'succeeded' | 'failed' | 'rolled_back';

/** A step of an OTA job as a device reported it on `devices/{serial}/ota/progress`. */
export interface OtaProgressReport {
  jobId: string;
  state: OtaProgressState;
  progress?: number | undefined;
  error?: string | undefined;
  /** Why it failed (with `failed` and `rolled_back`); a code outside the vocabulary arrives as `other`. */
  errorCode?: OtaErrorCode | undefined;
  /** The device sent an `error_code` outside the vocabulary (recorded as `other`, and counted). */
  unknownErrorCode?: boolean | undefined;
}

/** Implemented by the broker: how services reach devices. */
export interface DeviceGateway {
  /** Retained QoS 1 publish on `devices/{serial}/config`. */
  publishConfig(serial: string, message: { version: number; config: Record<string, unknown> }): Promise<void>;
  /** QoS 1 publish on `devices/{serial}/ota`. */
  publishOta(serial: string, job: OtaJob): Promise<void>;
  /**
   * Drop the device's connection now (credentials rotated, device unclaimed, certificate
   * revoked), on whichever process of the deployment holds it. Returns at once.
   * `match.certificateFingerprint`: only a session that authenticated with that certificate.
   */
  disconnect(serial: string, reason: string, match?: { certificateFingerprint?: string }): void;
  /**
   * The device has a new credential to receive (a planned rotation): whichever process of the
   * deployment holds its session delivers it there, now, if the device subscribed to its
   * `credentials` topic. Nothing is queued for a device that is not connected: it gets it on its
   * next connection. Returns at once.
   */
  offerCredentials(serial: string): void;
  /**
   * Forget what the broker keeps for a serial (unclaim): its retained configuration and its
   * persistent session (subscriptions, queued messages), so whoever claims it next starts clean.
   */
  forget(serial: string): Promise<void>;
  /** Connected to this process. */
  isConnected(serial: string): boolean;
  /**
   * Connected to this process and heard since it connected (OtaDeviceListener.onDeviceHeard went
   * out): what it reports from now on follows whatever it did while it was away.
   */
  heardSinceConnect(serial: string): boolean;
  /**
   * The id of the serial's current connection to this process (unique across processes and
   * restarts) once its `ota` subscription is in place, so that a command published now reaches
   * it; undefined otherwise (not connected here, or not subscribed yet). A command records the
   * connection it was sent on, so the re-send to a device that came back skips what its current
   * connection already got.
   */
  readyConnectionOf?(serial: string): string | undefined;
  /**
   * Publishes a sender may keep in flight at once without a queue building up inside the
   * broker (below its delivery concurrency).
   */
  readonly publishWindow: number;
}

/** The window of a gateway that does not say. */
export const DEFAULT_PUBLISH_WINDOW = 100;

/** Implemented by the OTA engine: what the broker tells it about devices. */
export interface OtaDeviceListener {
  /** The device is connected and subscribed to its `ota` topic: queued commands go out now. */
  onDeviceReady(input: { accountId: string; deviceId: string; serial: string }): Promise<void>;
  /**
   * Once per connection, after onDeviceReady: the device's first heartbeat on it arrived, and
   * every progress report it sent before that heartbeat (the one it kept while it was away comes
   * first) is stored. A `sent` command it has still not answered goes out again now; before
   * this, the device may have carried it out while it was away.
   */
  onDeviceHeard(input: {
    accountId: string;
    deviceId: string;
    serial: string;
    firmware: string;
    /** The connection it was heard on (DeviceGateway.readyConnectionOf). */
    connection?: string | undefined;
  }): Promise<void>;
  onProgress(input: { accountId: string; deviceId: string; serial: string; report: OtaProgressReport }): Promise<void>;
  /**
   * The device's `ota/lock` message (validated): its updates are held until the lock ends, or
   * released now. Resolves once stored. Absent: locks are not served (stand-ins in tests).
   */
  onLock?(input: { accountId: string; deviceId: string; serial: string; lock: UpdateLock }): Promise<void>;
  /**
   * After heartbeats were persisted, for each device whose reported firmware changed or that has
   * an update in progress (a heartbeat on the target version completes an update).
   */
  onFirmwareReported(
    reports: Array<{ accountId: string; deviceId: string; serial: string; firmware: string; previous: string | null }>,
  ): Promise<void>;
}

/**
 * The gateway of a process that runs no broker (the CLI): configuration stays in the database
 * for the device's next connection, nobody is connected here, and OTA commands cannot go out.
 */
export const NO_BROKER: DeviceGateway = {
  publishConfig: () => Promise.resolve(),
  publishOta: () => Promise.reject(new Error('no MQTT broker is running in this process')),
  disconnect: () => undefined,
  offerCredentials: () => undefined,
  forget: () => Promise.resolve(),
  isConnected: () => false,
  heardSinceConnect: () => false,
  publishWindow: DEFAULT_PUBLISH_WINDOW,
};
