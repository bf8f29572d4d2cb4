import { StatusMessage, parsePayload } from '#protocol/payloads';
import type { OfflineReason } from '#core/devices/presence-changes';
import type { HandlerContext, TopicHandler } from './context';

/**
 * `devices/{serial}/status`: `online` counts as being heard; `offline` (a graceful goodbye, or
 * the Last Will the broker publishes for a connection that died) marks the device offline,
 * unless a newer connection of the same device already took over.
 */
export const handleStatus: TopicHandler = (ctx, session, payload) => {
  const parsed = parsePayload(StatusMessage, payload);
  if (!parsed.ok) return parsed;
  if (!ctx.isCurrent()) return { ok: true };
  if (parsed.value.state === 'online') ctx.ingest.connected(session.deviceId);
  else ctx.ingest.offline(session.deviceId, offlineReason(ctx));
  return { ok: true };
};

/** The Will of a connection that stopped answering says why it went: its keepalive ran out. */
function offlineReason(ctx: HandlerContext): OfflineReason {
  if (!ctx.isWill) return 'status_offline';
  return ctx.keepaliveTimedOut ? 'keepalive_timeout' : 'last_will';
}
