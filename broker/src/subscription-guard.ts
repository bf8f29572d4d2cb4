import type { Client } from 'aedes';
import { maySubscribe } from './hooks/authorize';
import { parserOf, type SessionStore, type StoredSubscription } from './aedes-internals';

/** The service publishes at QoS 1 at most (docs/device-protocol.md "QoS"). */
export const MAX_GRANTED_QOS = 1;

/** The subscription calls of the session store used here. */
export type SubscriptionStore = Pick<
  SessionStore,
  'addSubscriptions' | 'removeSubscriptions' | 'subscriptionsByClient'
>;

/** The filters of a persistent session that the topic ACL allows its device, at QoS 1 at most. */
export function allowedSubscriptions(clientId: string, subs: readonly StoredSubscription[]): StoredSubscription[] {
  const allowed: StoredSubscription[] = [];
  for (const sub of subs) {
    if (maySubscribe(clientId, sub.topic))
      allowed.push(sub.qos > MAX_GRANTED_QOS ? { ...sub, qos: MAX_GRANTED_QOS } : sub);
  }
  return allowed;
}

/**
 * Aedes 1.2 stores the WHOLE filter list of a persistent session's SUBSCRIBE as soon as one of
 * its filters is allowed (handlers/subscribe.js `storeSubscriptions` passes
 * `packet.subscriptions`, denied filters included), and matches offline messages against what
 * is stored: a device that once sent ['#', its own ota] was queued every other account's
 * commands and configuration (test/abuse/mqtt-cross-tenant.test.ts). The store itself now
 * keeps only what the ACL allows, whatever Aedes hands it.
 */
export function guardStoredSubscriptions(store: SubscriptionStore): void {
  const add = store.addSubscriptions.bind(store);
  store.addSubscriptions = (client, subs) => {
    const allowed = allowedSubscriptions(client.id, subs);
    return allowed.length === 0 ? Promise.resolve() : add(client, allowed);
  };
}

/**
 * Removes from a shared session store every filter its device may not hold: subscriptions
 * stored by an earlier version, before the store was guarded. Returns how many were removed.
 */
export async function removeForeignSubscriptions(
  store: SubscriptionStore,
  clientIds: readonly string[],
): Promise<number> {
  let removed = 0;
  // Concurrent lookups in slices: one round trip per session one after the other took seconds
  // for a fleet of 10,000 persistent sessions.
  for (let i = 0; i < clientIds.length; i += 500) {
    const slice = clientIds.slice(i, i + 500);
    const counts = await Promise.all(
      slice.map(async (id) => {
        const stored = (await store.subscriptionsByClient({ id })) ?? [];
        const foreign = stored.filter((s) => !maySubscribe(id, s.topic)).map((s) => s.topic);
        const aboveGranted = allowedSubscriptions(
          id,
          stored.filter((s) => s.qos > MAX_GRANTED_QOS),
        );
        if (foreign.length > 0) await store.removeSubscriptions({ id }, foreign);
        // Stored again at the QoS the broker grants (the store replaces a filter's entry).
        if (aboveGranted.length > 0) await store.addSubscriptions({ id }, aboveGranted);
        return foreign.length;
      }),
    );
    for (const n of counts) removed += n;
  }
  return removed;
}

/**
 * Caps the QoS a SUBSCRIBE asks for before Aedes reads it: Aedes answers the SUBACK with the
 * requested QoS whatever `authorizeSubscribe` granted (a QoS 2 request was answered 2 although
 * the service never publishes above 1). Rewriting the packet makes the SUBACK, the live
 * subscription and the stored one agree.
 */
export function capSubscribeQos(client: Client): void {
  parserOf(client)?.prependListener('packet', (packet) => {
    if (packet.cmd !== 'subscribe' || !packet.subscriptions) return;
    for (const sub of packet.subscriptions) if (sub.qos > MAX_GRANTED_QOS) sub.qos = MAX_GRANTED_QOS;
  });
}
