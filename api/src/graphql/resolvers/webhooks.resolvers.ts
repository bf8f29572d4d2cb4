import { PUBLIC_EVENT_TYPES } from '#core/events/event-types';
import type { Resolvers } from '../generated/resolvers-types';
import { connection, withoutNulls } from './presenters';

/** Webhook endpoints and their delivery log: thin adapters over WebhookService. */
export const webhookResolvers: Resolvers = {
  Query: {
    webhooks: (_, __, ctx) => ctx.services.webhooks.list(ctx.actor),
    webhookEventTypes: () => [...PUBLIC_EVENT_TYPES],
    webhookDeliveries: async (_, { webhookId, ...pageArgs }, ctx) => {
      const page = await ctx.services.webhooks.deliveries(ctx.actor, webhookId, withoutNulls(pageArgs));
      return connection(page.deliveries, (_d, i) => page.cursors[i]!, page.nextCursor, {});
    },
  },
  Mutation: {
    createWebhook: (_, args, ctx) => ctx.services.webhooks.create(ctx.actor, withoutNulls(args.input)),
    updateWebhook: (_, args, ctx) => ctx.services.webhooks.update(ctx.actor, args.id, withoutNulls(args.input)),
    deleteWebhook: (_, args, ctx) => ctx.services.webhooks.delete(ctx.actor, args.id),
    redeliverWebhookDelivery: (_, args, ctx) => ctx.services.webhooks.redeliver(ctx.actor, args.id),
  },
};
