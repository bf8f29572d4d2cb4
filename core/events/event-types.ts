/**
 * Domain events: what happened, named `resource.past_tense`, carrying ids. They are written to
 * the outbox in the transaction of the change, then dispatched to the bus (GraphQL subscriptions,
 * webhooks, the OTA engine). Public types (webhooks) are listed in PUBLIC_EVENT_TYPES.
 */
export const EVENT_TYPES = [
  'device.online',
  'device.offline',
  'device.claimed',
  'device.updated',
  'device.unclaimed',
  'device.config_applied',
  /** A credential rotation took effect: emergency at once, planned once confirmed or its grace ended. */
  'device.credentials_rotated',
  /** The health pass judged a device's state different from before (docs/fixture-health.md). */
  'device.health_changed',
  'firmware.update.progress',
  'firmware.update.completed',
  'firmware.update.failed',
  'deployment.created',
  'deployment.updated',
  'deployment.paused',
  'deployment.completed',
  'allocation.threshold_reached',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** Event types a webhook may subscribe to (docs/webhooks.md). */
export const PUBLIC_EVENT_TYPES: readonly EventType[] = [
  'device.online',
  'device.offline',
  'device.claimed',
  'device.credentials_rotated',
  'device.health_changed',
  'firmware.update.completed',
  'firmware.update.failed',
  'deployment.paused',
  'deployment.completed',
  'allocation.threshold_reached',
];

export interface DomainEvent {
  /** Stable id: the same in every delivery and redelivery. */
  id: string;
  /** Outbox sequence: increasing in commit order of insertion. */
  seq: number;
  accountId: string;
  type: EventType;
  /** The resource the event is about (a serial, a deployment id): events of one subject stay in order. */
  subject: string | null;
  occurredAt: string;
  data: Record<string, unknown>;
}

export interface NewEvent {
  accountId: string;
  type: EventType;
  subject?: string | null;
  data: Record<string, unknown>;
  occurredAt?: Date;
}
