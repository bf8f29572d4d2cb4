import type { DomainEvent } from '#core/events/event-types';
import type { Event, Resolvers } from '../generated/resolvers-types';
import { liveField } from './presenters';

export const presentEvent = (event: DomainEvent): Event => ({
  id: event.id,
  type: event.type,
  subject: event.subject,
  occurredAt: event.occurredAt,
  data: event.data,
});

/** Recent events (query) and live events (subscription) of the caller's account. */
export const eventResolvers: Resolvers = {
  Query: {
    events: async (_, args, ctx) => (await ctx.services.events.recent(ctx.actor, args)).map(presentEvent),
  },
  Subscription: {
    events: liveField((_, args, ctx) => ctx.live.events(ctx.actor, args.types), presentEvent),
  },
};
