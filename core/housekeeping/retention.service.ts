import type { ServiceDeps } from '../service-deps';
import { KEY_TTL_MS } from '../shared/idempotency.service';
import { LOGIN_LIMITS } from '../accounts/login-throttle-rules';
import {
  deleteExpiredSessions,
  deleteIdempotencyKeysBefore,
  deleteSpentLoginThrottles,
  pruneEvents,
  pruneHistory,
} from './store/retention.store';

/** How long rows are kept, in days; 0 keeps them forever. README "Configuration" and "Retention". */
export interface RetentionPolicy {
  /** Device history (`GET /api/v1/devices/{serial}/history`). */
  historyDays: number;
  /** Dispatched outbox events (GraphQL `events`, webhook delivery logs) and the webhook deliveries made of them. */
  eventDays: number;
}

export const DEFAULT_RETENTION: RetentionPolicy = { historyDays: 365, eventDays: 30 };

/**
 * Rows deleted by one pass, per table. A type rather than an interface: callers sum and list it
 * with Object.values and Object.entries, which keep the number type only for a type literal.
 */
export type PruneResult = {
  deviceEvents: number;
  events: number;
  webhookDeliveries: number;
  sessions: number;
  idempotencyKeys: number;
  loginThrottle: number;
};

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
    const result: PruneResult = {
      deviceEvents: 0,
      events: 0,
      webhookDeliveries: 0,
      sessions: 0,
      idempotencyKeys: 0,
      loginThrottle: 0,
    };
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
        result.deviceEvents = await pruneHistory(
          knex,
          new Date(now.getTime() - this.policy.historyDays * DAY_MS),
          shouldStop,
        );
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
      result.sessions = await deleteExpiredSessions(knex, now);
    });
    await step('idempotency_keys', async () => {
      result.idempotencyKeys = await deleteIdempotencyKeysBefore(knex, new Date(now.getTime() - KEY_TTL_MS));
    });
    // A failure window long over and no lockout running: the row no longer decides anything;
    // per address, unless it still marks an address the user logged in from (LoginThrottle).
    await step('login_throttle', async () => {
      result.loginThrottle = await deleteSpentLoginThrottles(knex, {
        windowStartedBefore: new Date(now.getTime() - DAY_MS),
        now,
        knownSince: new Date(now.getTime() - LOGIN_LIMITS.knownAddressMs),
      });
    });
    return result;
  }
}
