import { parsePayload } from '#protocol/payloads';
import { UpdateLock } from '#protocol/lock-payloads';
import type { TopicHandler } from './context';

/**
 * `devices/{serial}/ota/lock`: validated here (an invalid lock is dropped and counted like any
 * refused message), stored by the OTA engine; acknowledged once stored. The serial is the
 * connection's own (the topic ACL refuses another's), so a device only ever locks its own updates.
 */
export const handleOtaLock: TopicHandler = (ctx, session, payload) => {
  const parsed = parsePayload(UpdateLock, payload);
  if (!parsed.ok) return parsed;
  const applied = ctx.otaListener.onLock?.({
    accountId: session.accountId,
    deviceId: session.deviceId,
    serial: session.serial,
    lock: parsed.value,
  });
  return applied ? { ok: true, applied } : { ok: true };
};
