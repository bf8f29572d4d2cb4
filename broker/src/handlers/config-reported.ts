import { ConfigReported, parsePayload } from '../protocol/payloads';
import type { TopicHandler } from './context';

/** `devices/{serial}/config/reported`: the device applied a configuration version. */
export const handleConfigReported: TopicHandler = (ctx, session, payload) => {
  const parsed = parsePayload(ConfigReported, payload);
  if (!parsed.ok) return parsed;
  ctx.configReports
    .reportApplied({ deviceId: session.deviceId, version: parsed.value.version })
    .catch((err: unknown) => ctx.logger.error({ err, serial: session.serial }, 'recording applied configuration failed'));
  return { ok: true };
};
