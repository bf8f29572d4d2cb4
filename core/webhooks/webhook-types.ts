/** Delivery states. Persisted values: never rename. */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
/** Deliveries not settled yet: the worker still sends them (unless their endpoint is disabled). */
export const UNSETTLED_DELIVERY_STATUSES = ['pending'] as const satisfies readonly DeliveryStatus[];

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

/** The signed body: `{id, type, occurred_at, data}` (docs/webhooks.md). */
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

/** A delivery as stored: the worker, a redelivery and the log work from it. */
export interface DeliveryRecord {
  id: string;
  accountId: string;
  webhookId: string;
  eventId: string;
  eventSeq: number;
  /** The event's subject: deliveries of one key to one endpoint are sent in event order. */
  orderingKey: string | null;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date;
  /** The lease of the process sending it. */
  lockedUntil: Date | null;
  lastStatusCode: number | null;
  lastError: string | null;
  lastDurationMs: number | null;
  deliveredAt: Date | null;
  createdAt: Date;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

export const toDelivery = (
  record: DeliveryRecord,
  event: WebhookEventBody,
  attempts: WebhookDeliveryAttempt[],
): WebhookDelivery => ({
  id: record.id,
  webhookId: record.webhookId,
  eventId: record.eventId,
  eventType: event.type,
  status: record.status,
  attempts: record.attempts,
  nextAttemptAt: record.status === 'pending' ? iso(record.nextAttemptAt) : null,
  lastStatusCode: record.lastStatusCode,
  lastError: record.lastError,
  lastDurationMs: record.lastDurationMs,
  deliveredAt: iso(record.deliveredAt),
  createdAt: record.createdAt.toISOString(),
  attemptLog: attempts,
  payload: event,
});
