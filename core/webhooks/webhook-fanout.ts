import type { Knex } from 'knex';
import { newTimeOrderedId } from '../shared/ids';
import type { Clock } from '../shared/clock';
import type { DomainEvent } from '../events/event-types';
import { fanOut, publicEvents } from './delivery-rules';
import { enabledSubscriptions } from './store/webhooks.store';
import { insertDeliveries } from './store/deliveries.store';

/**
 * Runs inside the outbox dispatcher's transaction (OutboxDispatcher `onBatch`): one delivery
 * row per (event, enabled endpoint subscribed to its type). The rows commit together with the
 * events leaving the outbox's queue, so an event is either fanned out exactly once or not yet at all:
 * a crash in between cannot lose or duplicate a delivery. The event's subject (a serial, a
 * deployment id) is the delivery's ordering key.
 */
export async function fanOutWebhookDeliveries(
  trx: Knex.Transaction,
  clock: Clock,
  events: DomainEvent[],
): Promise<number> {
  const candidates = publicEvents(events);
  if (candidates.length === 0) return 0;
  const subscribers = await enabledSubscriptions(trx, [...new Set(candidates.map((e) => e.accountId))]);
  if (subscribers.length === 0) return 0;
  const now = clock.now();
  const deliveries = fanOut(candidates, subscribers).map(({ event, webhookId }) => ({
    id: newTimeOrderedId(),
    accountId: event.accountId,
    webhookId,
    eventId: event.id,
    eventSeq: event.seq,
    orderingKey: event.subject,
    createdAt: now,
  }));
  await insertDeliveries(trx, deliveries);
  return deliveries.length;
}
