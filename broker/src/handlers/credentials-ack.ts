import { CredentialsAck } from '#protocol/credential-payloads';
import { parsePayload } from '#protocol/payloads';
import type { TopicHandler } from './context';

/**
 * `devices/{serial}/credentials/ack`: the device stored a delivery of `credentials`. Acknowledged
 * (PUBACK) once the rotation service recorded it; a stale or unknown `rotation_id` changes nothing.
 */
export const handleCredentialsAck: TopicHandler = (ctx, session, payload) => {
  // A Last Will is not the device confirming anything.
  if (ctx.isWill) return { ok: false, reason: 'invalid' };
  const parsed = parsePayload(CredentialsAck, payload);
  if (!parsed.ok) return parsed;
  return { ok: true, applied: ctx.credentials.acknowledge(session, parsed.value.rotation_id) };
};
