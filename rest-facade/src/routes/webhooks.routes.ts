import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { PUBLIC_EVENT_TYPES } from '#core/events/event-types';
import { IdParams } from '../schemas/common';
import {
  CreateWebhookBody,
  DeliveriesQuery,
  DeliveryParams,
  UpdateWebhookBody,
  WebhookDeliverySchema,
  WebhookSchema,
} from '../schemas/webhooks.schemas';
import { presentDelivery, presentWebhook } from '../presenters/webhooks.presenter';
import { withBodyFieldNames } from '../body-field-names';

/**
 * Webhook endpoints, their delivery log and manual redelivery (docs/webhooks.md). The bodies are
 * translated into the domain's inputs, and its field errors back into the bodies' names.
 */
export function webhookRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/webhooks',
      operationId: 'listWebhooks',
      summary: 'List the webhook endpoints of the account',
      tag: 'Webhooks',
      responses: {
        200: {
          description: 'The endpoints',
          schema: z.object({ webhooks: z.array(WebhookSchema), event_types: z.array(z.string()) }),
        },
      },
      handler: async ({ actor }) => ({
        status: 200,
        body: {
          webhooks: (await services.webhooks.list(actor)).map(presentWebhook),
          event_types: [...PUBLIC_EVENT_TYPES],
        },
      }),
    }),
    defineRoute({
      method: 'post',
      path: '/webhooks',
      operationId: 'createWebhook',
      summary: 'Register a webhook endpoint; the signing secret is in this response only',
      tag: 'Webhooks',
      body: CreateWebhookBody,
      responses: { 201: { description: 'Created', schema: z.object({ webhook: WebhookSchema, secret: z.string() }) } },
      handler: async ({ actor, body: input }) => {
        const created = await withBodyFieldNames(() =>
          services.webhooks.create(actor, {
            url: input.url,
            eventTypes: input.event_types,
            ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
          }),
        );
        return { status: 201, body: { webhook: presentWebhook(created.webhook), secret: created.secret } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/webhooks/:id',
      operationId: 'getWebhook',
      summary: 'One webhook endpoint',
      tag: 'Webhooks',
      params: IdParams,
      responses: { 200: { description: 'The endpoint', schema: z.object({ webhook: WebhookSchema }) } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: { webhook: presentWebhook(await services.webhooks.get(actor, params.id)) },
      }),
    }),
    defineRoute({
      method: 'patch',
      path: '/webhooks/:id',
      operationId: 'updateWebhook',
      summary: 'Change the URL or event types, or enable/disable (enabling clears an automatic disable)',
      tag: 'Webhooks',
      params: IdParams,
      body: UpdateWebhookBody,
      responses: { 200: { description: 'Updated', schema: z.object({ webhook: WebhookSchema }) } },
      handler: async ({ actor, params, body: input }) => {
        const updated = await withBodyFieldNames(() =>
          services.webhooks.update(actor, params.id, {
            ...(input.url !== undefined ? { url: input.url } : {}),
            ...(input.event_types !== undefined ? { eventTypes: input.event_types } : {}),
            ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
          }),
        );
        return { status: 200, body: { webhook: presentWebhook(updated) } };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/webhooks/:id',
      operationId: 'deleteWebhook',
      summary: 'Delete a webhook endpoint and its deliveries',
      tag: 'Webhooks',
      params: IdParams,
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ actor, params }) => {
        await services.webhooks.delete(actor, params.id);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/webhooks/:id/deliveries',
      operationId: 'listWebhookDeliveries',
      summary: 'Delivery log of an endpoint, newest event first, with every attempt (status code, duration, error)',
      tag: 'Webhooks',
      params: IdParams,
      query: DeliveriesQuery,
      responses: {
        200: {
          description: 'A page of deliveries',
          schema: z.object({ deliveries: z.array(WebhookDeliverySchema), next_cursor: z.string().nullable() }),
        },
      },
      handler: async ({ actor, params, query: q }) => {
        const page = await services.webhooks.deliveries(actor, params.id, {
          first: q.limit,
          after: q.cursor ?? null,
          status: q.status ?? null,
        });
        return {
          status: 200,
          body: { deliveries: page.deliveries.map(presentDelivery), next_cursor: page.nextCursor },
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/webhooks/:id/deliveries/:deliveryId/redeliver',
      operationId: 'redeliverWebhookDelivery',
      summary: 'Send a delivery again now (same event id and body)',
      tag: 'Webhooks',
      params: DeliveryParams,
      responses: { 202: { description: 'Queued for delivery', schema: z.object({ delivery: WebhookDeliverySchema }) } },
      handler: async ({ actor, params }) => ({
        status: 202,
        body: {
          delivery: presentDelivery(
            await services.webhooks.redeliver(actor, params.deliveryId, { webhookId: params.id }),
          ),
        },
      }),
    }),
  ];
}
