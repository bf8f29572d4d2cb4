import { Heartbeat, parsePayload } from '#protocol/payloads';
import type { TopicHandler } from './context';

/** `devices/{serial}/heartbeat`: coalesced in memory, written in the next batch. */
export const handleHeartbeat: TopicHandler = (ctx, session, payload) => {
  const parsed = parsePayload(Heartbeat, payload);
  if (!parsed.ok) return parsed;
  ctx.ingest.heartbeat(session.deviceId, parsed.value);
  return { ok: true, firmware: parsed.value.firmware };
};
