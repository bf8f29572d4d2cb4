import { sqlList } from '../../shared/sql-list';
import { UNSETTLED_DELIVERY_STATUSES } from '../../webhooks/webhook-types';
import type { Db } from '../../db/db';

/** Rows looked at per statement: each statement is short, so pruning never holds locks for long. */
const WINDOW = 5000;

/** What a DELETE answers: the rows it removed (null when the driver does not say). */
interface RowCount {
  rowCount: number | null;
}

export async function deleteExpiredSessions(db: Db, now: Date): Promise<number> {
  return (await db.raw<RowCount>('DELETE FROM sessions WHERE expires_at < ?', [now])).rowCount ?? 0;
}

export async function deleteIdempotencyKeysBefore(db: Db, createdBefore: Date): Promise<number> {
  return (await db.raw<RowCount>('DELETE FROM idempotency_keys WHERE created_at < ?', [createdBefore])).rowCount ?? 0;
}

/**
 * Throttle rows whose failure window started before `windowStartedBefore` and whose lockout is
 * over at `now`: they no longer decide anything. Per address, only when the address is no
 * longer known either (no login from there since `knownSince`).
 */
export async function deleteSpentLoginThrottles(
  db: Db,
  input: { windowStartedBefore: Date; now: Date; knownSince: Date },
): Promise<number> {
  const { windowStartedBefore: dayAgo, now } = input;
  return (
    ((
      await db.raw<RowCount>(
        'DELETE FROM login_throttle WHERE window_started_at < ? AND (locked_until IS NULL OR locked_until < ?)',
        [dayAgo, now],
      )
    ).rowCount ?? 0) +
    ((
      await db.raw<RowCount>(
        'DELETE FROM login_address_throttle WHERE window_started_at < ? AND (locked_until IS NULL OR locked_until < ?) AND (last_success_at IS NULL OR last_success_at < ?)',
        [dayAgo, now, input.knownSince],
      )
    ).rowCount ?? 0)
  );
}

interface WindowRow {
  /** Largest key of the window; null when the window was empty. */
  last: string | null;
  /** Whether the window held anything older than the cutoff. */
  any_old: boolean | null;
}

/**
 * Walks a table window by window from its start: `window(after)` runs one window statement after
 * that key, until a window is empty or holds nothing old enough, or `shouldStop` says so.
 */
async function walk(shouldStop: () => boolean, window: (after: string) => Promise<WindowRow>): Promise<void> {
  let after = '0';
  for (;;) {
    const row = await window(after);
    if (row.last === null || !row.any_old || shouldStop()) return;
    after = row.last;
  }
}

export async function pruneHistory(knex: Db, cutoff: Date, shouldStop: () => boolean): Promise<number> {
  let deleted = 0;
  await walk(shouldStop, async (after) => {
    // Bindings: the cutoff, then the key to start after.
    const { rows } = await knex.raw<{ rows: Array<WindowRow & { deleted: number }> }>(
      `WITH win AS (SELECT id, occurred_at < ? AS old FROM device_events WHERE id > ? ORDER BY id LIMIT ${WINDOW}),
          doomed AS (SELECT e.id FROM device_events e JOIN win ON win.id = e.id WHERE win.old FOR UPDATE OF e SKIP LOCKED),
          gone AS (DELETE FROM device_events e USING doomed WHERE e.id = doomed.id RETURNING 1)
     SELECT (SELECT max(id) FROM win)::text AS last, (SELECT count(*) FROM gone)::int AS deleted, (SELECT bool_or(old) FROM win) AS any_old`,
      [cutoff, after],
    );
    const row = rows[0]!;
    deleted += row.deleted;
    return row;
  });
  return deleted;
}

/**
 * An event goes with its deliveries (their log shows it, a redelivery sends it), and only once
 * it is dispatched and none of its deliveries is still being retried: a pending delivery of a
 * disabled endpoint is not retried, and would otherwise keep its event for as long as the
 * endpoint stays disabled (for ever, for an endpoint disabled for good). The event rows are
 * locked first: a redelivery locks its event before it makes the delivery pending again
 * (WebhookService.redeliver), so the two never cross. Undispatched events are not locked (the
 * outbox would skip them and dispatch out of order).
 */
export async function pruneEvents(
  knex: Db,
  cutoff: Date,
  shouldStop: () => boolean,
): Promise<{ events: number; deliveries: number }> {
  const total = { events: 0, deliveries: 0 };
  await walk(shouldStop, async (after) => {
    // Bindings: the cutoff, then the key to start after.
    const { rows } = await knex.raw<{ rows: Array<WindowRow & { events: number; deliveries: number }> }>(
      `WITH win AS (SELECT seq, occurred_at < ? AS old, NOT EXISTS (SELECT 1 FROM events_pending p WHERE p.seq = events.seq) AS dispatched
                     FROM events WHERE seq > ? ORDER BY seq LIMIT ${WINDOW}),
          doomed AS (SELECT e.seq FROM events e JOIN win ON win.seq = e.seq
                      WHERE win.old AND win.dispatched
                        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
                                         WHERE d.event_seq = win.seq AND d.status IN (${sqlList(UNSETTLED_DELIVERY_STATUSES)}) AND w.enabled)
                      FOR UPDATE OF e SKIP LOCKED),
          gone_deliveries AS (DELETE FROM webhook_deliveries d USING doomed WHERE d.event_seq = doomed.seq RETURNING 1),
          gone_events AS (DELETE FROM events e USING doomed WHERE e.seq = doomed.seq RETURNING 1)
     SELECT (SELECT max(seq) FROM win)::text AS last, (SELECT count(*) FROM gone_events)::int AS events,
            (SELECT count(*) FROM gone_deliveries)::int AS deliveries, (SELECT bool_or(old) FROM win) AS any_old`,
      [cutoff, after],
    );
    const row = rows[0]!;
    total.events += row.events;
    total.deliveries += row.deliveries;
    return row;
  });
  return total;
}
