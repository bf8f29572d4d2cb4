import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { KEY_TTL_MS } from '../shared/idempotency.service';
import { LOGIN_LIMITS } from '../accounts/login-throttle';

/** How long rows are kept, in days; 0 keeps them forever. README "Configuration" and "Retention". */
export interface RetentionPolicy {
  /** Device history (`GET /api/v1/devices/{serial}/history`). */
  historyDays: number;
  /** Dispatched outbox events (GraphQL `events`, webhook delivery logs) and the webhook deliveries made of them. */
  eventDays: number;
}

export const DEFAULT_RETENTION: RetentionPolicy = { historyDays: 365, eventDays: 30 };

/** Rows deleted by one pass, per table. */
export interface PruneResult {
  deviceEvents: number;
  events: number;
  webhookDeliveries: number;
  sessions: number;
  idempotencyKeys: number;
  loginThrottle: number;
}

/** Rows looked at per statement: each statement is short, so pruning never holds locks for long. */
const WINDOW = 5000;
const DAY_MS = 86_400_000;

/**
 * Housekeeping of the tables that grow with time. Device history and the outbox are walked in
 * key order (ids grow with time) a window at a time, each window its own statement; the walk
 * ends at the first window with nothing old enough. What is still needed is never deleted: an
 * undispatched event, an event whose delivery to an enabled webhook is still pending, an
 * unexpired session, a lockout still running. Rows are locked with SKIP LOCKED before they are deleted, so a pass
 * never waits on (or deadlocks with) an unclaim, a redelivery or another process's pass: what
 * is busy is left for the next pass.
 */
export class RetentionService {
  constructor(
    private readonly deps: Pick<ServiceDeps, 'knex' | 'clock' | 'logger'>,
    private readonly policy: RetentionPolicy = DEFAULT_RETENTION,
  ) {}

  /**
   * One pass over every table. `shouldStop` is asked between windows (a shutdown does not wait
   * for a first pass over years of history); a table that fails is logged and the others still run.
   */
  async pruneOnce(shouldStop: () => boolean = () => false): Promise<PruneResult> {
    const now = this.deps.clock.now();
    const { knex } = this.deps;
    const result: PruneResult = { deviceEvents: 0, events: 0, webhookDeliveries: 0, sessions: 0, idempotencyKeys: 0, loginThrottle: 0 };
    const step = async (table: string, work: () => Promise<void>) => {
      if (shouldStop()) return;
      try {
        await work();
      } catch (err) {
        this.deps.logger.warn({ err, table }, 'retention: pruning failed; the next pass tries again');
      }
    };
    if (this.policy.historyDays > 0) {
      await step('device_events', async () => {
        result.deviceEvents = await pruneHistory(knex, new Date(now.getTime() - this.policy.historyDays * DAY_MS), shouldStop);
      });
    }
    if (this.policy.eventDays > 0) {
      await step('events', async () => {
        const pruned = await pruneEvents(knex, new Date(now.getTime() - this.policy.eventDays * DAY_MS), shouldStop);
        result.events = pruned.events;
        result.webhookDeliveries = pruned.deliveries;
      });
    }
    await step('sessions', async () => {
      result.sessions = (await knex.raw('DELETE FROM sessions WHERE expires_at < ?', [now])).rowCount ?? 0;
    });
    await step('idempotency_keys', async () => {
      result.idempotencyKeys = (await knex.raw('DELETE FROM idempotency_keys WHERE created_at < ?', [new Date(now.getTime() - KEY_TTL_MS)])).rowCount ?? 0;
    });
    // A failure window long over and no lockout running: the row no longer decides anything;
    // per address, unless it still marks an address the user logged in from (LoginThrottle).
    await step('login_throttle', async () => {
      const dayAgo = new Date(now.getTime() - DAY_MS);
      result.loginThrottle =
        ((await knex.raw('DELETE FROM login_throttle WHERE window_started_at < ? AND (locked_until IS NULL OR locked_until < ?)', [dayAgo, now])).rowCount ?? 0) +
        ((
          await knex.raw(
            'DELETE FROM login_address_throttle WHERE window_started_at < ? AND (locked_until IS NULL OR locked_until < ?) AND (last_success_at IS NULL OR last_success_at < ?)',
            [dayAgo, now, new Date(now.getTime() - LOGIN_LIMITS.knownAddressMs)],
          )
        ).rowCount ?? 0);
    });
    return result;
  }
}

interface WindowRow {
  /** Largest key of the window; null when the window was empty. */
  last: string | null;
  /** Whether the window held anything older than the cutoff. */
  any_old: boolean | null;
}

/**
 * Runs a window statement (bindings: cutoff, then the key to start after) from the start of the
 * table until a window is empty or holds nothing old enough, or `shouldStop` says so.
 */
async function walk<T extends WindowRow>(knex: Knex, sql: string, cutoff: Date, shouldStop: () => boolean, add: (row: T) => void): Promise<void> {
  let after = '0';
  for (;;) {
    const row = (await knex.raw(sql, [cutoff, after])).rows[0] as T;
    add(row);
    if (row.last === null || !row.any_old || shouldStop()) return;
    after = row.last;
  }
}

async function pruneHistory(knex: Knex, cutoff: Date, shouldStop: () => boolean): Promise<number> {
  let deleted = 0;
  await walk<WindowRow & { deleted: number }>(
    knex,
    `WITH win AS (SELECT id, occurred_at < ? AS old FROM device_events WHERE id > ? ORDER BY id LIMIT ${WINDOW}),
          doomed AS (SELECT e.id FROM device_events e JOIN win ON win.id = e.id WHERE win.old FOR UPDATE OF e SKIP LOCKED),
          gone AS (DELETE FROM device_events e USING doomed WHERE e.id = doomed.id RETURNING 1)
     SELECT (SELECT max(id) FROM win)::text AS last, (SELECT count(*) FROM gone)::int AS deleted, (SELECT bool_or(old) FROM win) AS any_old`,
    cutoff,
    shouldStop,
    (row) => (deleted += row.deleted),
  );
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
async function pruneEvents(knex: Knex, cutoff: Date, shouldStop: () => boolean): Promise<{ events: number; deliveries: number }> {
  const total = { events: 0, deliveries: 0 };
  await walk<WindowRow & { events: number; deliveries: number }>(
    knex,
    `WITH win AS (SELECT seq, occurred_at < ? AS old, dispatched_at IS NOT NULL AS dispatched FROM events WHERE seq > ? ORDER BY seq LIMIT ${WINDOW}),
          doomed AS (SELECT e.seq FROM events e JOIN win ON win.seq = e.seq
                      WHERE win.old AND win.dispatched
                        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
                                         WHERE d.event_seq = win.seq AND d.status = 'pending' AND w.enabled)
                      FOR UPDATE OF e SKIP LOCKED),
          gone_deliveries AS (DELETE FROM webhook_deliveries d USING doomed WHERE d.event_seq = doomed.seq RETURNING 1),
          gone_events AS (DELETE FROM events e USING doomed WHERE e.seq = doomed.seq RETURNING 1)
     SELECT (SELECT max(seq) FROM win)::text AS last, (SELECT count(*) FROM gone_events)::int AS events,
            (SELECT count(*) FROM gone_deliveries)::int AS deliveries, (SELECT bool_or(old) FROM win) AS any_old`,
    cutoff,
    shouldStop,
    (row) => {
      total.events += row.events;
      total.deliveries += row.deliveries;
    },
  );
  return total;
}
