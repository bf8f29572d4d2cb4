import type { Webhook, WebhookDelivery } from '#core/webhooks/webhook-types';

/** Domain webhook endpoint -> wire format (snake_case). */
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

/** Domain delivery -> wire format (snake_case); `payload` is the event body sent, already in it. */
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
