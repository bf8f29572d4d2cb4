import { readHeartbeat } from '#protocol/heartbeat-fields';
import type { TopicHandler } from './context';

/**
 * `devices/{serial}/heartbeat`: coalesced in memory, written in the next batch. Read field by
 * field: a JSON object counts as the device being heard, its valid fields are recorded and each
 * invalid one is refused on its own. One above the size limit is not read but still counts as
 * heard (its content is dropped and counted); one that is not a JSON object is dropped whole.
 */
export const handleHeartbeat: TopicHandler = (ctx, session, payload) => {
  const read = readHeartbeat(payload);
  if (!read.ok) {
    if (read.reason === 'too_large') ctx.ingest.heartbeat(session.deviceId, {});
    return read;
  }
  ctx.ingest.heartbeat(session.deviceId, read.values, read.refused);
  return { ok: true, firmware: read.values.firmware, refusedFields: read.refused };
};
