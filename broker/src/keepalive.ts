import type { AedesOptions } from 'aedes';
import { KEEPALIVE_MAX_S, KEEPALIVE_MIN_S } from '#protocol/payloads';

type PreConnectHandler = NonNullable<AedesOptions['preConnect']>;

/** Why a CONNECT's keepalive is outside the documented range (metric label). */
export type KeepaliveOutside = 'zero' | 'above_max' | 'below_min';

/**
 * The keepalive the broker serves for the one a CONNECT asks (seconds). MQTT 3.1.1 lets a server
 * neither lower a client's keepalive nor tell it another one, and a refusal would leave a device
 * already in the field unable to reach the service that could update it, so nothing is refused:
 * 0 (which turns the check off [MQTT-3.1.2-24]) and anything above the maximum are served as the
 * maximum, so a dead connection is always found; values below the minimum are served as sent
 * (they only cost the device and the broker more PINGREQs).
 */
export function servedKeepalive(
  requested: number,
  maxS: number = KEEPALIVE_MAX_S,
): { seconds: number; outside: KeepaliveOutside | null } {
  if (requested === 0) return { seconds: maxS, outside: 'zero' };
  if (requested > maxS) return { seconds: maxS, outside: 'above_max' };
  return { seconds: requested, outside: requested < KEEPALIVE_MIN_S ? 'below_min' : null };
}

/**
 * A preConnect hook that serves the keepalive above, then hands over to `next`. Aedes arms its
 * keepalive timer (1.5 x `packet.keepalive`, lib/handlers/connect.js setKeepAlive) from the very
 * CONNECT packet it gave preConnect, after preConnect returned: setting the field here is how the
 * served value takes effect (test/broker/keepalive.test.ts shows it on aedes as pinned).
 */
export function withServedKeepalive(
  next: PreConnectHandler,
  options: { maxS?: number; onOutside?: (reason: KeepaliveOutside) => void } = {},
): PreConnectHandler {
  return (client, packet, callback) => {
    const served = servedKeepalive(packet.keepalive ?? 0, options.maxS);
    if (served.outside) options.onOutside?.(served.outside);
    packet.keepalive = served.seconds;
    next(client, packet, callback);
  };
}
