import {
  ConfigMessage,
  MAX_CONFIG_MESSAGE_BYTES,
  MAX_OTA_COMMAND_BYTES,
  OtaCommand,
  readOtaErrorCode,
  type ReceivedOtaProgress,
} from '#protocol/payloads';
import type { OtaJob, OtaProgressReport } from '#core/devices/device-gateway';
import { CredentialsMessage } from '#protocol/credential-payloads';
import type { CredentialsDelivery } from '#core/devices/credential-rotation.service';

/**
 * Between the domain's types and the protocol's payloads, in both directions. What the service
 * sends goes through the protocol's schemas in their strict form, so it cannot send what the
 * protocol does not allow (a field devices do not know, a signature without its key id) nor a
 * message larger than the protocol's limit for its topic; a value that breaks the protocol makes
 * the publish fail instead of reaching devices. (Devices read those schemas as open: they ignore
 * fields they do not know, so fields can be added.)
 */

const StrictOtaCommand = OtaCommand.strict();
const StrictConfigMessage = ConfigMessage.strict();

/** The payload of a command; throws when it breaks the protocol or its size limit. */
export function otaCommandPayload(job: OtaJob): OtaCommand {
  const command: OtaCommand = StrictOtaCommand.parse({
    job_id: job.jobId,
    version: job.version,
    model: job.model,
    url: job.url,
    sha256: job.sha256,
    size: job.size,
    ...(job.signature ? { signature: job.signature.value, key_id: job.signature.keyId } : {}),
    ...(job.delta ? { delta: job.delta } : {}),
  });
  // Two long links (a PUBLIC_URL of hundreds of characters) can pass the limit: the delta is an
  // offer, so the command goes without it rather than not at all.
  if (command.delta && Buffer.byteLength(JSON.stringify(command)) > MAX_OTA_COMMAND_BYTES)
    return otaCommandPayload({ ...job, delta: undefined });
  return withinLimit(command, MAX_OTA_COMMAND_BYTES, 'OTA command');
}

/** The payload of a configuration message, stamped with the service's time; throws like otaCommandPayload. */
export function configPayload(
  message: { version: number; config: Record<string, unknown> },
  now: Date = new Date(),
): ConfigMessage {
  const payload: ConfigMessage = StrictConfigMessage.parse({
    version: message.version,
    config: message.config,
    server_time: now.toISOString(),
  });
  return withinLimit(payload, MAX_CONFIG_MESSAGE_BYTES, 'configuration message');
}

function withinLimit<T>(payload: T, limit: number, what: string): T {
  const bytes = Buffer.byteLength(JSON.stringify(payload));
  if (bytes > limit) throw new Error(`${what} of ${bytes} bytes is over the protocol's limit of ${limit}`);
  return payload;
}

export function progressReport(payload: ReceivedOtaProgress): OtaProgressReport {
  const code = readOtaErrorCode(payload.error_code);
  return {
    jobId: payload.job_id,
    state: payload.state,
    ...(payload.progress !== undefined ? { progress: payload.progress } : {}),
    ...(payload.error !== undefined ? { error: payload.error } : {}),
    ...(code.code !== undefined ? { errorCode: code.code } : {}),
    ...(code.unknown ? { unknownErrorCode: true } : {}),
  };
}

export function credentialsPayload(delivery: CredentialsDelivery): CredentialsMessage {
  return CredentialsMessage.parse(
    delivery.kind === 'password'
      ? {
          type: 'password',
          rotation_id: delivery.rotationId,
          username: delivery.username,
          password: delivery.password,
          grace_ends_at: delivery.graceEndsAt.toISOString(),
        }
      : {
          type: 'certificate',
          rotation_id: delivery.rotationId,
          certificate: delivery.certificatePem,
          fingerprint_sha256: delivery.fingerprintSha256,
          not_after: delivery.notAfter.toISOString(),
          grace_ends_at: delivery.graceEndsAt.toISOString(),
        },
  );
}
