import type { Knex } from 'knex';
import type { AttemptOutcome } from '../delivery-rules';
import type { DeliveryRecord, DeliveryStatus, WebhookDeliveryAttempt, WebhookEventBody } from '../webhook-types';
import type { Db } from '../../db/db';

interface DeliveryRow {
  id: string;
  account_id: string;
  webhook_id: string;
  event_id: string;
  event_seq: number | string;
  ordering_key: string | null;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date;
  locked_until: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  last_duration_ms: number | null;
  delivered_at: Date | null;
  created_at: Date;
}

const dateOrNull = (d: Date | null): Date | null => (d ? new Date(d) : null);

const toDeliveryRecord = (row: DeliveryRow): DeliveryRecord => ({
  id: row.id,
  accountId: row.account_id,
  webhookId: row.webhook_id,
  eventId: row.event_id,
  eventSeq: Number(row.event_seq),
  orderingKey: row.ordering_key,
  status: row.status,
  attempts: row.attempts,
  nextAttemptAt: new Date(row.next_attempt_at),
  lockedUntil: dateOrNull(row.locked_until),
  lastStatusCode: row.last_status_code,
  lastError: row.last_error,
  lastDurationMs: row.last_duration_ms,
  deliveredAt: dateOrNull(row.delivered_at),
  createdAt: new Date(row.created_at),
});

interface EventRow {
  id: string;
  type: string;
  occurred_at: Date;
  data: Record<string, unknown>;
}

/** The signed body of a delivery: `{id, type, occurred_at, data}` of its event. */
const toEventBody = (row: EventRow): WebhookEventBody => ({
  id: row.id,
  type: row.type,
  occurred_at: new Date(row.occurred_at).toISOString(),
  data: row.data,
});

interface AttemptRow {
  delivery_id: string;
  attempted_at: Date;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

/** A new delivery of an event to an endpoint, due at once. */
export interface NewDelivery {
  id: string;
  accountId: string;
  webhookId: string;
  eventId: string;
  eventSeq: number;
  orderingKey: string | null;
  createdAt: Date;
}

export async function insertDeliveries(trx: Knex.Transaction, deliveries: NewDelivery[]): Promise<void> {
  const rows = deliveries.map((d) => ({
    id: d.id,
    account_id: d.accountId,
    webhook_id: d.webhookId,
    event_id: d.eventId,
    event_seq: d.eventSeq,
    ordering_key: d.orderingKey,
    status: 'pending' satisfies DeliveryStatus,
    attempts: 0,
    next_attempt_at: d.createdAt,
    created_at: d.createdAt,
  }));
  for (let i = 0; i < rows.length; i += 1000) await trx('webhook_deliveries').insert(rows.slice(i, i + 1000));
}

/**
 * Due, unleased deliveries of enabled endpoints whose earlier same-subject deliveries are done,
 * locked (SKIP LOCKED: several processes share the work without sending twice).
 */
export async function lockDueDeliveries(
  trx: Knex.Transaction,
  input: { now: Date; limit: number },
): Promise<DeliveryRecord[]> {
  const { now } = input;
  const rows = await trx('webhook_deliveries as d')
    .join('webhooks as w', 'w.id', 'd.webhook_id')
    .where('d.status', 'pending')
    .where('w.enabled', true)
    .where('d.next_attempt_at', '<=', now)
    // `void`: a builder is thenable, and knex does not await what a grouping callback returns.
    .where((q) => void q.whereNull('d.locked_until').orWhere('d.locked_until', '<=', now))
    .whereNotExists(function earlier() {
      this.select(trx.raw('1'))
        .from('webhook_deliveries as e')
        .whereRaw('e.webhook_id = d.webhook_id')
        .whereRaw('e.ordering_key = d.ordering_key')
        .where('e.status', 'pending')
        .whereRaw('e.event_seq < d.event_seq');
    })
    .orderBy([{ column: 'd.next_attempt_at' }, { column: 'd.event_seq' }])
    .limit(input.limit)
    .forUpdate('d')
    .skipLocked()
    .select<DeliveryRow[]>('d.*');
  return rows.map(toDeliveryRecord);
}

/** Leases the deliveries to this process until `lockedUntil`. */
export async function leaseDeliveries(
  trx: Knex.Transaction,
  input: { ids: string[]; lockedUntil: Date },
): Promise<void> {
  await trx('webhook_deliveries').whereIn('id', input.ids).update({ locked_until: input.lockedUntil });
}

/** The body to send; null when the event is gone. */
export async function eventBodyOf(db: Db, eventId: string): Promise<WebhookEventBody | null> {
  const row = await db('events')
    .where({ id: eventId })
    .first<EventRow | undefined>('id', 'type', 'occurred_at', 'data');
  return row ? toEventBody(row) : null;
}

export async function eventBodiesOf(db: Db, eventIds: string[]): Promise<WebhookEventBody[]> {
  const rows = await db('events').whereIn('id', eventIds).select<EventRow[]>('id', 'type', 'occurred_at', 'data');
  return rows.map(toEventBody);
}

/** The attempt log of each delivery, oldest first. */
export async function attemptsOf(db: Db, deliveryIds: string[]): Promise<Map<string, WebhookDeliveryAttempt[]>> {
  const rows = (await db('webhook_delivery_attempts')
    .whereIn('delivery_id', deliveryIds)
    .orderBy('id')) as AttemptRow[];
  const byDelivery = new Map<string, WebhookDeliveryAttempt[]>();
  for (const a of rows) {
    const list = byDelivery.get(a.delivery_id) ?? [];
    list.push({
      attemptedAt: new Date(a.attempted_at).toISOString(),
      statusCode: a.status_code,
      durationMs: a.duration_ms,
      error: a.error,
    });
    byDelivery.set(a.delivery_id, list);
  }
  return byDelivery;
}

export async function insertAttempt(
  db: Db,
  input: {
    deliveryId: string;
    attempt: { attemptedAt: Date; statusCode: number | null; durationMs: number; error: string | null };
  },
): Promise<void> {
  const { attempt } = input;
  await db('webhook_delivery_attempts').insert({
    delivery_id: input.deliveryId,
    attempted_at: attempt.attemptedAt,
    status_code: attempt.statusCode,
    duration_ms: attempt.durationMs,
    error: attempt.error,
  });
}

/** A delivery after an attempt (afterAttempt in delivery-rules.ts); the lease ends with it. */
export type AttemptedDelivery = AttemptOutcome['delivery'];

export async function saveAttempted(db: Db, input: { id: string; delivery: AttemptedDelivery }): Promise<void> {
  const { delivery } = input;
  const common = {
    attempts: delivery.attempts,
    locked_until: null,
    last_status_code: delivery.lastStatusCode,
    last_error: delivery.lastError,
    last_duration_ms: delivery.lastDurationMs,
  };
  await db('webhook_deliveries')
    .where({ id: input.id })
    .update(
      delivery.status === 'delivered'
        ? { ...common, status: delivery.status, delivered_at: delivery.deliveredAt }
        : { ...common, status: delivery.status, next_attempt_at: delivery.nextAttemptAt },
    );
}

/** A page of an endpoint's deliveries, newest event first, after the (event_seq, id) cursor. */
export async function listDeliveries(
  db: Db,
  input: {
    webhookId: string;
    accountId: string;
    limit: number;
    status: DeliveryStatus | null;
    after: [eventSeq: number, id: string] | null;
  },
): Promise<DeliveryRecord[]> {
  const query = db('webhook_deliveries')
    .where({ webhook_id: input.webhookId, account_id: input.accountId })
    .orderBy([
      { column: 'event_seq', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(input.limit);
  if (input.status) query.where({ status: input.status });
  if (input.after) query.whereRaw('(event_seq, id) < (?, ?)', input.after);
  const rows = (await query) as DeliveryRow[];
  return rows.map(toDeliveryRecord);
}

export async function findDelivery(db: Db, input: { id: string; accountId: string }): Promise<DeliveryRecord | null> {
  const row = (await db('webhook_deliveries').where({ id: input.id, account_id: input.accountId }).first()) as
    DeliveryRow | undefined;
  return row ? toDeliveryRecord(row) : null;
}

export async function deliveryEventSeq(db: Db, input: { id: string; accountId: string }): Promise<number | null> {
  const row = await db('webhook_deliveries')
    .where({ id: input.id, account_id: input.accountId })
    .first<Pick<DeliveryRow, 'event_seq'> | undefined>('event_seq');
  return row ? Number(row.event_seq) : null;
}

/**
 * Share-locks the event (the retention pass deletes it only with its rows locked first); false
 * when it is gone already.
 */
export async function shareLockEvent(trx: Knex.Transaction, seq: number): Promise<boolean> {
  return (await trx('events').where({ seq }).forShare().first('seq')) !== undefined;
}

export async function lockDelivery(
  trx: Knex.Transaction,
  input: { id: string; accountId: string },
): Promise<DeliveryRecord | null> {
  const row = (await trx('webhook_deliveries')
    .where({ id: input.id, account_id: input.accountId })
    .forUpdate()
    .first()) as DeliveryRow | undefined;
  return row ? toDeliveryRecord(row) : null;
}

/** Makes the delivery due again (a redelivery; see redelivered in delivery-rules.ts). */
export async function requeueDelivery(
  db: Db,
  input: { id: string; nextAttemptAt: Date; createdAt: Date },
): Promise<void> {
  await db('webhook_deliveries')
    .where({ id: input.id })
    .update({
      status: 'pending' satisfies DeliveryStatus,
      next_attempt_at: input.nextAttemptAt,
      delivered_at: null,
      locked_until: null,
      created_at: input.createdAt,
    });
}
