/** Delivery states. Persisted values: never rename. */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface Webhook {
  id: string;
  url: string;
  eventTypes: string[];
  enabled: boolean;
  disabledReason: string | null;
  failingSince: string | null;
  secretPrefix: string;
  createdAt: string;
}

export interface WebhookDeliveryAttempt {
  attemptedAt: string;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

/** The signed body: decisions.md `{id, type, occurred_at, data}`. */
export interface WebhookEventBody {
  id: string;
  type: string;
  occurred_at: string;
  data: Record<string, unknown>;
}

export interface WebhookDelivery {
  id: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: string | null;
  lastStatusCode: number | null;
  lastError: string | null;
  lastDurationMs: number | null;
  deliveredAt: string | null;
  createdAt: string;
  attemptLog: WebhookDeliveryAttempt[];
  payload: WebhookEventBody;
}

export interface WebhookRow {
  id: string;
  account_id: string;
  url: string;
  event_types: string[];
  secret_ciphertext: string;
  secret_prefix: string;
  enabled: boolean;
  disabled_reason: string | null;
  failing_since: Date | null;
  created_at: Date;
}

export interface DeliveryRow {
  id: string;
  account_id: string;
  webhook_id: string;
  event_id: string;
  event_seq: number;
  ordering_key: string | null;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date;
  locked_until: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  last_duration_ms: number | null;
  delivered_at: Date | null;
  created_at: Date;
}

const iso = (d: Date | null | undefined): string | null => (d ? new Date(d).toISOString() : null);

export const toWebhook = (row: WebhookRow): Webhook => ({
  id: row.id,
  url: row.url,
  eventTypes: row.event_types,
  enabled: row.enabled,
  disabledReason: row.disabled_reason,
  failingSince: iso(row.failing_since),
  secretPrefix: row.secret_prefix,
  createdAt: new Date(row.created_at).toISOString(),
});

export const eventBody = (row: { id: string; type: string; occurred_at: Date; data: Record<string, unknown> }): WebhookEventBody => ({
  id: row.id,
  type: row.type,
  occurred_at: new Date(row.occurred_at).toISOString(),
  data: row.data,
});

export const toDelivery = (row: DeliveryRow, event: WebhookEventBody, attempts: WebhookDeliveryAttempt[]): WebhookDelivery => ({
  id: row.id,
  webhookId: row.webhook_id,
  eventId: row.event_id,
  eventType: event.type,
  status: row.status,
  attempts: row.attempts,
  nextAttemptAt: row.status === 'pending' ? iso(row.next_attempt_at) : null,
  lastStatusCode: row.last_status_code,
  lastError: row.last_error,
  lastDurationMs: row.last_duration_ms,
  deliveredAt: iso(row.delivered_at),
  createdAt: new Date(row.created_at).toISOString(),
  attemptLog: attempts,
  payload: event,
});
