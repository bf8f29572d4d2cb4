import type { GraphQLContext } from '../context';
import { PUBLIC_EVENT_TYPES } from '../../events/event-types';
import type { CreateWebhookInput, UpdateWebhookInput } from '../../domain/webhooks/webhook.service';
import type { DeliveryStatus } from '../../domain/webhooks/webhook-types';
import { connection } from './presenters';

/** Webhook endpoints and their delivery log: thin adapters over WebhookService. */
export const webhookResolvers = {
  Query: {
    webhooks: (_: unknown, __: unknown, ctx: GraphQLContext) => ctx.services.webhooks.list(ctx.actor),
    webhookEventTypes: () => PUBLIC_EVENT_TYPES,
    webhookDeliveries: async (
      _: unknown,
      args: { webhookId: string; first?: number | null; after?: string | null; status?: DeliveryStatus | null },
      ctx: GraphQLContext,
    ) => {
      const page = await ctx.services.webhooks.deliveries(ctx.actor, args.webhookId, {
        ...(args.first != null ? { first: args.first } : {}),
        after: args.after ?? null,
        status: args.status ?? null,
      });
      // The cursor of each row is opaque; only the page's end cursor is meaningful for paging.
      return connection(page.deliveries, (d) => d.id, page.nextCursor);
    },
  },
  Mutation: {
    createWebhook: (_: unknown, args: { input: CreateWebhookInput }, ctx: GraphQLContext) =>
      ctx.services.webhooks.create(ctx.actor, args.input),
    updateWebhook: (_: unknown, args: { id: string; input: UpdateWebhookInput }, ctx: GraphQLContext) =>
      ctx.services.webhooks.update(ctx.actor, args.id, stripNulls(args.input)),
    deleteWebhook: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      ctx.services.webhooks.delete(ctx.actor, args.id),
    redeliverWebhookDelivery: (_: unknown, args: { id: string }, ctx: GraphQLContext) =>
      ctx.services.webhooks.redeliver(ctx.actor, args.id),
  },
};

/** GraphQL sends explicit nulls for omitted optional inputs in variables; the services expect absence. */
function stripNulls<T extends object>(input: T): T {
  return Object.fromEntries(Object.entries(input).filter(([, v]) => v !== null)) as T;
}
