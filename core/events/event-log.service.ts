import type { ServiceDeps } from '../service-deps';
import type { Actor } from '../shared/actor';
import { DomainError } from '../shared/errors';
import { EVENT_TYPES } from './event-types';
import { selectRecentEvents } from './store/events.store';
import type { DomainEvent } from './event-types';

export const MAX_RECENT_EVENTS = 500;

/** Reads the account's events from the outbox (the same ids as live events and webhook deliveries). */
export class EventLogService {
  constructor(private readonly deps: ServiceDeps) {}

  /** Newest first. */
  async recent(actor: Actor, input: { first?: number | null; types?: string[] | null }): Promise<DomainEvent[]> {
    const first = input.first ?? 50;
    if (!Number.isInteger(first) || first < 1 || first > MAX_RECENT_EVENTS) {
      throw new DomainError('validation_failed', `first must be 1 to ${MAX_RECENT_EVENTS}.`, {
        errors: [{ field: 'first', message: `must be 1 to ${MAX_RECENT_EVENTS}` }],
      });
    }
    const types = input.types ?? null;
    if (types) {
      const unknown = types.filter((t) => !(EVENT_TYPES as readonly string[]).includes(t));
      if (unknown.length) {
        throw new DomainError('validation_failed', `Unknown event types: ${unknown.join(', ')}.`, {
          errors: unknown.map((t) => ({ field: 'types', message: `${t} is not an event type` })),
        });
      }
    }
    return selectRecentEvents(this.deps.knex, { accountId: actor.accountId, first, types });
  }
}
