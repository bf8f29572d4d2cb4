import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { PUBLIC_EVENT_TYPES } from '#core/events/event-types';
import { DELIVERY_STATUSES, type Webhook, type WebhookDelivery } from '#core/webhooks/webhook-types';
import { MAX_DELIVERY_PAGE } from '#core/webhooks/webhook.service';
import { IdParams } from '../schemas/common';

const EventType = z.enum(PUBLIC_EVENT_TYPES as [string, ...string[]]);

export const WebhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    event_types: z.array(z.string()),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable(),
    failing_since: z.string().nullable(),
    secret_prefix: z.string(),
    created_at: z.string(),
  })
  .meta({ id: 'Webhook' });

const AttemptSchema = z.object({
  attempted_at: z.string(),
  status_code: z.number().int().nullable(),
  duration_ms: z.number().int(),
  error: z.string().nullable(),
});

export const WebhookDeliverySchema = z
  .object({
    id: z.string(),
    webhook_id: z.string(),
    event_id: z.string(),
    event_type: z.string(),
    status: z.enum(DELIVERY_STATUSES),
    attempts: z.number().int(),
    next_attempt_at: z.string().nullable(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    last_duration_ms: z.number().int().nullable(),
    delivered_at: z.string().nullable(),
    created_at: z.string(),
    attempt_log: z.array(AttemptSchema),
    payload: z.object({
      id: z.string(),
      type: z.string(),
      occurred_at: z.string(),
      data: z.record(z.string(), z.unknown()),
    }),
  })
  .meta({ id: 'WebhookDelivery' });

export const presentWebhook = (w: Webhook) => ({
  id: w.id,
  url: w.url,
  event_types: w.eventTypes,
  enabled: w.enabled,
  disabled_reason: w.disabledReason,
  failing_since: w.failingSince,
  secret_prefix: w.secretPrefix,
  created_at: w.createdAt,
});

export const presentDelivery = (d: WebhookDelivery) => ({
  id: d.id,
  webhook_id: d.webhookId,
  event_id: d.eventId,
  event_type: d.eventType,
  status: d.status,
  attempts: d.attempts,
  next_attempt_at: d.nextAttemptAt,
  last_status_code: d.lastStatusCode,
  last_error: d.lastError,
  last_duration_ms: d.lastDurationMs,
  delivered_at: d.deliveredAt,
  created_at: d.createdAt,
  attempt_log: d.attemptLog.map((a) => ({
    attempted_at: a.attemptedAt,
    status_code: a.statusCode,
    duration_ms: a.durationMs,
    error: a.error,
  })),
  payload: d.payload,
});

const CreateWebhookBody = z.strictObject({
  url: z.string().min(1).max(2048),
  event_types: z.array(EventType).min(1),
  enabled: z.boolean().optional(),
});

const UpdateWebhookBody = z.strictObject({
  url: z.string().min(1).max(2048).optional(),
  event_types: z.array(EventType).min(1).optional(),
  enabled: z.boolean().optional(),
});

const DeliveriesQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(MAX_DELIVERY_PAGE).default(50),
  cursor: z.string().max(200).optional(),
  status: z.enum(DELIVERY_STATUSES).optional(),
});

const DeliveryParams = z.object({ id: z.string().min(1).max(64), deliveryId: z.string().min(1).max(64) });

/** Webhook endpoints, their delivery log and manual redelivery (docs/webhooks.md). */
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
        const created = await services.webhooks.create(actor, {
          url: input.url,
          eventTypes: input.event_types,
          ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
        });
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
        const updated = await services.webhooks.update(actor, params.id, {
          ...(input.url !== undefined ? { url: input.url } : {}),
          ...(input.event_types !== undefined ? { eventTypes: input.event_types } : {}),
          ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
        });
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
