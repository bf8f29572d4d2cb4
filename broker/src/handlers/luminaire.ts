import { readLuminaire } from '#protocol/luminaire-fields';
import type { TopicHandler } from './context';

/**
 * `devices/{serial}/luminaire`: read field by field (valid fields recorded, each invalid one
 * refused and counted on its own, a bad clock replaced by the time of receipt), then stored; the
 * PUBACK waits for the commit of the batch that holds it (docs/luminaire-data.md "Ingestion").
 * Only a payload that is not a JSON object, or one above the size limit, is dropped whole.
 */
export const handleLuminaire: TopicHandler = (ctx, session, payload) => {
  if (!ctx.luminaire) return { ok: false, reason: 'invalid' };
  const read = readLuminaire(payload, ctx.luminaire.now());
  if (!read.ok) return read;
  const applied = ctx.luminaire.record({
    accountId: session.accountId,
    deviceId: session.deviceId,
    serial: session.serial,
    values: read.values,
    at: read.at,
    badClock: read.badClock,
    refused: read.refused,
  });
  return { ok: true, applied };
};
