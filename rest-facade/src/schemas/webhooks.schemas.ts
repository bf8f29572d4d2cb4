import { z } from 'zod';
import { PUBLIC_EVENT_TYPES } from '#core/events/event-types';
import { DELIVERY_STATUSES } from '#core/webhooks/webhook-types';
import { MAX_DELIVERY_PAGE } from '#core/webhooks/webhook.service';

/**
 * Wire schemas (snake_case) of the webhook routes: endpoints, their delivery log and the bodies.
 * The bodies are REST's own: the routes translate them into the domain's CreateWebhookInput and
 * UpdateWebhookInput (camelCase).
 */

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

export const CreateWebhookBody = z.strictObject({
  url: z.string().min(1).max(2048),
  event_types: z.array(EventType).min(1),
  enabled: z.boolean().optional(),
});

export const UpdateWebhookBody = z.strictObject({
  url: z.string().min(1).max(2048).optional(),
  event_types: z.array(EventType).min(1).optional(),
  enabled: z.boolean().optional(),
});

export const DeliveriesQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(MAX_DELIVERY_PAGE).default(50),
  cursor: z.string().max(200).optional(),
  status: z.enum(DELIVERY_STATUSES).optional(),
});

export const DeliveryParams = z.object({ id: z.string().min(1).max(64), deliveryId: z.string().min(1).max(64) });
