import type { DomainEvent } from '../events/event-types';
import { PUBLIC_EVENT_TYPES } from '../events/event-types';
import { DISABLE_AFTER_MS, RETRY_WINDOW_MS, retryDelayMs } from './backoff';
import type { SendResult } from './webhook-sender';
import type { DeliveryStatus } from './webhook-types';

/**
 * The rules of webhook deliveries, free of storage and transport. A delivery is `pending` until
 * an attempt goes through (`delivered`) or it has been retried for RETRY_WINDOW_MS since it was
 * made (`failed`); a redelivery makes any delivery `pending` again. An endpoint whose
 * deliveries have all failed for DISABLE_AFTER_MS is disabled.
 */

/** Attempts in flight per endpoint: a receiver that hangs until the timeout cannot take every slot. */
export const MAX_PER_ENDPOINT = 4;
/** Kept of a receiver's error text, per attempt. */
export const MAX_ERROR_LENGTH = 500;

const PUBLIC = new Set<string>(PUBLIC_EVENT_TYPES);

/** An enabled endpoint and the event types it subscribed to. */
export interface Subscriber {
  webhookId: string;
  accountId: string;
  eventTypes: string[];
}

/** The public events among `events`: only they are ever delivered. */
export const publicEvents = (events: DomainEvent[]): DomainEvent[] => events.filter((e) => PUBLIC.has(e.type));

/**
 * One delivery per (public event, enabled endpoint of its account subscribed to its type), in
 * event order, then endpoint order.
 */
export function fanOut(
  events: DomainEvent[],
  subscribers: Subscriber[],
): Array<{ event: DomainEvent; webhookId: string }> {
  const byAccount = new Map<string, Subscriber[]>();
  for (const s of subscribers) byAccount.set(s.accountId, [...(byAccount.get(s.accountId) ?? []), s]);
  return publicEvents(events).flatMap((event) =>
    (byAccount.get(event.accountId) ?? [])
      .filter((s) => s.eventTypes.includes(event.type))
      .map((s) => ({ event, webhookId: s.webhookId })),
  );
}

/**
 * Of the due deliveries (in due order), those to attempt now: at most `perEndpoint` per
 * endpoint and `total` in all.
 */
export function pickForAttempt<T extends { webhookId: string }>(
  due: T[],
  limits: { perEndpoint: number; total: number },
): T[] {
  const perEndpoint = new Map<string, number>();
  return due
    .filter((d) => {
      const n = perEndpoint.get(d.webhookId) ?? 0;
      if (n >= limits.perEndpoint) return false;
      perEndpoint.set(d.webhookId, n + 1);
      return true;
    })
    .slice(0, limits.total);
}

/** The delivery after an attempt, and what the attempt came to. */
export interface AttemptOutcome {
  outcome: 'delivered' | 'failed' | 'gave_up';
  delivery: {
    attempts: number;
    lastStatusCode: number | null;
    lastError: string | null;
    lastDurationMs: number;
  } & ({ status: 'delivered'; deliveredAt: Date } | { status: 'pending' | 'failed'; nextAttemptAt: Date });
}

/**
 * The transition of a `pending` delivery by one attempt's result: `delivered`, or `pending` due
 * again after the backoff, or `failed` once the retry window since its creation is over.
 */
export function afterAttempt(input: {
  attemptsBefore: number;
  createdAt: Date;
  now: Date;
  result: SendResult;
  random?: () => number;
}): AttemptOutcome {
  const { now, result } = input;
  const attempts = input.attemptsBefore + 1;
  const common = {
    attempts,
    lastStatusCode: result.statusCode,
    lastError: truncatedError(result.error),
    lastDurationMs: result.durationMs,
  };
  if (result.error === null)
    return { outcome: 'delivered', delivery: { ...common, status: 'delivered', deliveredAt: now } };
  const giveUp = now.getTime() - input.createdAt.getTime() >= RETRY_WINDOW_MS;
  return {
    outcome: giveUp ? 'gave_up' : 'failed',
    // A failed delivery keeps a next attempt time; it is not shown, and a redelivery replaces it.
    delivery: {
      ...common,
      status: giveUp ? 'failed' : 'pending',
      nextAttemptAt: new Date(now.getTime() + retryDelayMs(attempts, input.random)),
    },
  };
}

export const truncatedError = (error: string | null): string | null => error?.slice(0, MAX_ERROR_LENGTH) ?? null;

/**
 * The endpoint's failure run after a failed attempt: it started at the first failure since the
 * last success; past DISABLE_AFTER_MS the endpoint is disabled, with the reason shown to users.
 */
export function failureRun(input: { failingSince: Date | null; now: Date }): {
  failingSince: Date;
  disabledReason: string | null;
} {
  const since = input.failingSince ?? input.now;
  const disable = input.now.getTime() - since.getTime() >= DISABLE_AFTER_MS;
  return {
    failingSince: since,
    disabledReason: disable
      ? `every delivery failed since ${since.toISOString()} (disabled after ${DISABLE_AFTER_MS / 86_400_000} days)`
      : null,
  };
}

/**
 * A redelivery: due now, as a new delivery (its retry window starts again) unless it is still
 * pending, which keeps its window.
 */
export function redelivered(
  current: { status: DeliveryStatus; createdAt: Date },
  now: Date,
): { status: 'pending'; nextAttemptAt: Date; createdAt: Date } {
  return { status: 'pending', nextAttemptAt: now, createdAt: current.status === 'pending' ? current.createdAt : now };
}
