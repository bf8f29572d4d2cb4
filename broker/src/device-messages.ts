import { ConfigMessage, OtaCommand, type OtaProgress } from '#protocol/payloads';
import type { OtaJob, OtaProgressReport } from '#core/devices/device-gateway';

/**
 * Between the domain's types and the protocol's payloads, in both directions. What the service
 * sends goes through the protocol's strict schemas, so it cannot send what the protocol does
 * not allow (a field devices do not know, a signature without its key id); a value that breaks
 * the protocol makes the publish fail instead of reaching devices.
 */

export function otaCommandPayload(job: OtaJob): OtaCommand {
  return OtaCommand.parse({
    job_id: job.jobId,
    version: job.version,
    url: job.url,
    sha256: job.sha256,
    size: job.size,
    ...(job.signature ? { signature: job.signature.value, key_id: job.signature.keyId } : {}),
  });
}

export function configPayload(message: { version: number; config: Record<string, unknown> }): ConfigMessage {
  return ConfigMessage.parse({ version: message.version, config: message.config });
}

export function progressReport(payload: OtaProgress): OtaProgressReport {
  return {
    jobId: payload.job_id,
    state: payload.state,
    ...(payload.progress !== undefined ? { progress: payload.progress } : {}),
    ...(payload.error !== undefined ? { error: payload.error } : {}),
  };
}
