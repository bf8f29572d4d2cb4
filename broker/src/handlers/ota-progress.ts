import { ReceivedOtaProgress, parsePayload } from '#protocol/payloads';
import { isUuid } from '#core/shared/ids';
import { progressReport } from '../device-messages';
import type { TopicHandler } from './context';

/** `devices/{serial}/ota/progress`: validated here, judged by the OTA engine (late or foreign job ids are its call). */
export const handleOtaProgress: TopicHandler = (ctx, session, payload) => {
  // `error_code` is read apart (an unknown code is `other`, never a reason to drop the report).
  const parsed = parsePayload(ReceivedOtaProgress, payload);
  if (!parsed.ok) return parsed;
  // Job ids are the service's own UUIDs: anything else cannot name a job of this device.
  if (!isUuid(parsed.value.job_id)) return { ok: false, reason: 'invalid' };
  // Acknowledged once the engine stored it: a report acknowledged and then lost with the process
  // (kill -9 within the engine's batching delay) left an update `downloading` until its deadline.
  const applied = ctx.otaListener.onProgress({
    accountId: session.accountId,
    deviceId: session.deviceId,
    serial: session.serial,
    report: progressReport(parsed.value),
  });
  return { ok: true, applied };
};
