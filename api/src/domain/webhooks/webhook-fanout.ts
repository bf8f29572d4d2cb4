import type { Knex } from 'knex';
import { newId } from '../shared/ids';
import type { Clock } from '../shared/clock';
import { PUBLIC_EVENT_TYPES, type DomainEvent } from '../../events/event-types';

const PUBLIC = new Set<string>(PUBLIC_EVENT_TYPES);

/**
 * Runs inside the outbox dispatcher's transaction (OutboxDispatcher `onBatch`): one delivery
 * row per (event, enabled endpoint subscribed to its type). The rows commit together with the
 * events' `dispatched_at`, so an event is either fanned out exactly once or not yet at all:
 * a crash in between cannot lose or duplicate a delivery. The event's subject (a serial, a
 * deployment id) is the delivery's ordering key.
 */
export async function fanOutWebhookDeliveries(trx: Knex.Transaction, clock: Clock, events: DomainEvent[]): Promise<number> {
  const candidates = events.filter((e) => PUBLIC.has(e.type));
  if (candidates.length === 0) return 0;
  const accountIds = [...new Set(candidates.map((e) => e.accountId))];
  const hooks = (await trx('webhooks').whereIn('account_id', accountIds).where({ enabled: true }).select('id', 'account_id', 'event_types')) as Array<{
    id: string;
    account_id: string;
    event_types: string[];
  }>;
  if (hooks.length === 0) return 0;
  const byAccount = new Map<string, typeof hooks>();
  for (const hook of hooks) byAccount.set(hook.account_id, [...(byAccount.get(hook.account_id) ?? []), hook]);
  const now = clock.now();
  const rows: Record<string, unknown>[] = [];
  for (const event of candidates) {
    for (const hook of byAccount.get(event.accountId) ?? []) {
      if (!hook.event_types.includes(event.type)) continue;
      rows.push({
        id: newId(),
        account_id: event.accountId,
        webhook_id: hook.id,
        event_id: event.id,
        event_seq: event.seq,
        ordering_key: event.subject,
        status: 'pending',
        attempts: 0,
        next_attempt_at: now,
        created_at: now,
      });
    }
  }
  for (let i = 0; i < rows.length; i += 1000) await trx('webhook_deliveries').insert(rows.slice(i, i + 1000));
  return rows.length;
}
