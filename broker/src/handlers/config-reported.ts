import { ConfigReported, parsePayload } from '#protocol/payloads';
import type { TopicHandler } from './context';

/**
 * `devices/{serial}/config/reported`: the device applied a configuration version. Coalesced
 * and written with the next heartbeat batch (only the current desired version is recorded).
 */
export const handleConfigReported: TopicHandler = (ctx, session, payload) => {
  const parsed = parsePayload(ConfigReported, payload);
  if (!parsed.ok) return parsed;
  ctx.ingest.configReported(session.deviceId, parsed.value.version);
  return { ok: true };
};
