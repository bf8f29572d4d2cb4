import type { KeyObject } from 'node:crypto';
import type { SimulatedDevice } from './simulated-device';
import type { DeviceCredentials } from './device-secrets';
import type { LuminaireFaultOptions } from './luminaire-faults';
import type { ReconnectPolicy } from './reconnect-backoff';

/** What one simulated lighting module is and does (simulated-device.ts). */
export interface SimulatedDeviceOptions {
  credentials: DeviceCredentials;
  /** mqtt://host:port, mqtts://host:port, ws://host:port/mqtt or wss://host:port/mqtt */
  brokerUrl: string;
  /** CA certificate(s) (PEM) the device trusts for the service's TLS certificate (`--ca`). */
  ca?: string;
  /** Version the device runs at start. */
  firmware: string;
  /** Heartbeat period in seconds (fractions allowed for load tests). Default: the configured `heartbeat_interval_s`, else 60. */
  heartbeatS?: number;
  /** Heartbeat QoS. Default 1. */
  heartbeatQos?: 0 | 1;
  /** Probability (0..1) that an OTA update fails. Default 0. */
  failRate?: number;
  /** The module's model (`--model`): an OTA command for another model is refused with `wrong_model`. Unset: not checked. */
  model?: string;
  /**
   * The firmware signing public key (Ed25519) the module trusts (`--signing-key`). Set: every
   * image must come with a signature by this key over its SHA-256 digest, or the update is
   * reported `failed` with an error starting `signature_invalid`. Unset: no signature is checked.
   */
  signingKey?: KeyObject;
  /** Download speed in kilobits per second; 0 = as fast as possible. Default 0. */
  downloadKbps?: number;
  /**
   * Firmware images by version (`--images DIR`), shared by the fleet: with them the module
   * applies a command's delta to the image it runs and keeps each image it installs. Unset: full images only.
   */
  images?: Map<string, Uint8Array>;
  /** Applying a delta fails with `delta_apply` (`--fail-delta`): the service must fall back to the full image. */
  failDeltaApply?: boolean;
  /** Probability per minute that the connection drops abruptly (the Last Will fires). Default 0. */
  flapRate?: number;
  /** MQTT clean session. Default false (protocol v1); benchmarks against a shared Mosquitto use true. */
  clean?: boolean;
  /** Reboot duration in ms after an install. Default 1500. */
  rebootMs?: number;
  /** Every MQTT message in and out (`--verbose`). */
  trace?: (line: string) => void;
  /** State changes for the fleet's counters. */
  onChange?: (device: SimulatedDevice) => void;
  /** A rotation changed the device's credentials (`--credentials` saves them again). */
  onCredentialsChange?: (credentials: DeviceCredentials) => void;
  /** Report luminaire data (`--luminaire`): readings every `luminaire_interval_s`, or every this many seconds when a number. */
  luminaire?: boolean | number;
  /** Faults in those readings: a failing driver, a firmware version that raises the fault rate. */
  luminaireFaults?: LuminaireFaultOptions;
  /** Random source (tests pass a seeded one). */
  random?: () => number;
  /** When to try again after a lost or refused connection. Default: the documented device policy. */
  reconnect?: ReconnectPolicy;
  /**
   * Awaited after a command is accepted and before the download starts (Fleet.holdDownloads):
   * a benchmark measures the service's publishing rate without the fleet's downloads and
   * reports taking the same cores, then lets every device go at once.
   */
  downloadGate?: () => Promise<void>;
}
