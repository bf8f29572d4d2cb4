import type { Knex } from 'knex';
import type { DomainEvent, EventType } from '../event-types';
import { preparedRaw } from '../../db/prepared';

/** A row of the outbox table `events`. */
interface EventRow {
  /** bigint, read as a number (database.ts sets the INT8 parser). */
  seq: number;
  id: string;
  account_id: string;
  type: string;
  subject: string | null;
  data: Record<string, unknown>;
  occurred_at: Date;
}

/** An event as written: ids and times already decided by the caller. */
export interface EventInsert {
  id: string;
  accountId: string;
  type: string;
  subject: string | null;
  data: Record<string, unknown>;
  occurredAt: Date;
}

function toDomainEvent(row: EventRow): DomainEvent {
  return {
    id: row.id,
    seq: row.seq,
    accountId: row.account_id,
    type: row.type as EventType,
    subject: row.subject,
    occurredAt: new Date(row.occurred_at).toISOString(),
    data: row.data,
  };
}

/**
 * One JSON document for the whole batch, unpacked by PostgreSQL. Before, each event was six bind
 * parameters compiled and escaped one by one by the query builder (60,000 for a dispatch of
 * 10,000 OTA commands, in chunks to stay under PostgreSQL's parameter limit). `seq` follows the
 * order of the list. Each event's key joins the outbox's queue (`events_pending`) in the same
 * statement.
 */
export async function insertEvents(db: Knex | Knex.Transaction, events: EventInsert[]): Promise<void> {
  const rows = events.map((e) => ({
    id: e.id,
    account_id: e.accountId,
    type: e.type,
    subject: e.subject,
    data: e.data,
    occurred_at: e.occurredAt,
  }));
  await db.raw(
    `WITH inserted AS (
       INSERT INTO events (id, account_id, type, subject, data, occurred_at)
       SELECT (e ->> 'id')::uuid, (e ->> 'account_id')::uuid, e ->> 'type', e ->> 'subject', e -> 'data', (e ->> 'occurred_at')::timestamptz
         FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY AS x(e, ord)
        ORDER BY ord
       RETURNING seq)
     INSERT INTO events_pending (seq) SELECT seq FROM inserted`,
    [JSON.stringify(rows)],
  );
}

/**
 * The oldest events not yet dispatched, their queue entries locked for this transaction; entries
 * another process holds are skipped (`FOR UPDATE SKIP LOCKED`), so several dispatchers never
 * send one twice. The events are read by key from an array of the locked keys: as a join, the
 * planner expected up to `limit` rows and hashed the whole `events` table for each batch (a seq
 * scan that grows with the retention window).
 */
export async function claimUndispatched(trx: Knex.Transaction, limit: number): Promise<DomainEvent[]> {
  const { rows } = await preparedRaw<{ rows: EventRow[] }>(
    trx,
    `SELECT e.seq, e.id, e.account_id, e.type, e.subject, e.data, e.occurred_at
       FROM events e
      WHERE e.seq = ANY (ARRAY(SELECT seq FROM events_pending ORDER BY seq LIMIT ? FOR UPDATE SKIP LOCKED))
      ORDER BY e.seq`,
    [limit],
  );
  return rows.map(toDomainEvent);
}

/**
 * Takes the batch out of the queue: a delete of narrow rows, where marking each event row cost
 * a new version of it and entries in all its indexes. One array parameter: a list of 1,000 bind
 * parameters cost PostgreSQL 15-25 ms to parse and plan per round while an OTA dispatch wrote
 * 10,000 events (its slow log).
 */
export async function markDispatched(trx: Knex.Transaction, input: { seqs: number[] }): Promise<void> {
  await trx.raw('DELETE FROM events_pending WHERE seq = ANY(?::bigint[])', [input.seqs]);
}

/** The account's events, newest first, optionally only these types. */
export async function selectRecentEvents(
  db: Knex,
  input: { accountId: string; first: number; types: string[] | null },
): Promise<DomainEvent[]> {
  const query = db('events').where({ account_id: input.accountId }).orderBy('seq', 'desc').limit(input.first);
  if (input.types && input.types.length) query.whereIn('type', input.types);
  return ((await query) as EventRow[]).map(toDomainEvent);
}
