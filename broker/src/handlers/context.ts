import type { Logger } from '#core/logger';
import type { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import type { OtaDeviceListener } from '#core/devices/device-gateway';
import type { DeviceSession } from '#core/devices/device-auth.service';
import type { RefusedField } from '#protocol/heartbeat-fields';
import type { LuminaireReport } from '#core/luminaire/luminaire-ingest';

/** What a topic handler may use. Handlers stay thin: validate, call one service, return. */
export interface HandlerContext {
  ingest: HeartbeatIngest;
  otaListener: OtaDeviceListener;
  logger: Logger;
  /** A message from the connection that is no longer the device's current one (taken over). */
  isCurrent: () => boolean;
  /** True while the message is the connection's Last Will (not a message the device sent). */
  isWill: boolean;
  /** The broker closed the connection because its keepalive ran out (its Will follows). */
  keepaliveTimedOut: boolean;
  /** Credentials rotation: acknowledgements and certificate requests (credential-delivery.ts). */
  credentials: CredentialRequests;
  /** Luminaire readings (absent where the broker serves no luminaire store: such messages are dropped as invalid). */
  luminaire?: LuminaireSink | undefined;
}

/** Where luminaire readings go; `record` settles once the reading is stored. */
export interface LuminaireSink {
  /** The service's clock (a reading's `at` is judged against it). */
  now(): Date;
  record(report: LuminaireReport): Promise<void>;
}

/** What the `credentials/ack` and `csr` handlers hand on; each settles once stored (or refused and counted). */
export interface CredentialRequests {
  acknowledge(session: DeviceSession, rotationId: string): Promise<void>;
  requestCertificate(session: DeviceSession, csr: string): Promise<void>;
}

export type DropReason = 'too_large' | 'not_json' | 'not_object' | 'invalid' | 'rate_limited';
/**
 * `applied`: the message is acknowledged (PUBACK) only once this settles, and the connection is
 * closed instead when it fails, so a device keeps and re-sends what the service did not store.
 * `firmware`: what a heartbeat says the device runs (its first on a connection lets the OTA
 * engine re-send an unanswered command). `refusedFields`: fields of a heartbeat refused on their
 * own (the rest of it was recorded).
 */
export type HandlerResult =
  | { ok: true; applied?: Promise<void>; firmware?: string; refusedFields?: RefusedField[] }
  | { ok: false; reason: DropReason };

export type TopicHandler = (ctx: HandlerContext, session: DeviceSession, payload: Buffer) => HandlerResult;
