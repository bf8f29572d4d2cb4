import type { GraphQLContext } from '../context';
import type { DomainEvent } from '../../events/event-types';

export const presentEvent = (event: DomainEvent) => ({
  id: event.id,
  type: event.type,
  subject: event.subject,
  occurredAt: event.occurredAt,
  data: event.data,
});

/** Recent events (query) and live events (subscription) of the caller's account. */
export const eventResolvers = {
  Query: {
    events: async (_: unknown, args: { first?: number | null; types?: string[] | null }, ctx: GraphQLContext) =>
      (await ctx.services.events.recent(ctx.actor, args)).map(presentEvent),
  },
  Subscription: {
    events: {
      subscribe: (_: unknown, args: { types?: string[] | null }, ctx: GraphQLContext) =>
        ctx.live.events(ctx.actor, args.types),
      resolve: (event: DomainEvent) => presentEvent(event),
    },
  },
};
