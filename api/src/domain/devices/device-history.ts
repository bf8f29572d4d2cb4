import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import { defineCursor } from '../shared/cursor';

/**
 * Device history: every change of status, firmware, configuration, claim and update step is a
 * timestamped row, written in the transaction of the change. Types are stable strings.
 */
export const DEVICE_EVENT_TYPES = [
  'claimed',
  'status_changed',
  'firmware_changed',
  'firmware_changed_outside_ota',
  'config_changed',
  'config_applied',
  'credentials_rotated',
  'certificate_issued',
  'certificate_revoked',
  'renamed',
  'tags_changed',
  'update_step',
] as const;
export type DeviceEventType = (typeof DEVICE_EVENT_TYPES)[number];

export interface NewDeviceEvent {
  accountId: string;
  deviceId: string;
  type: DeviceEventType;
  data?: Record<string, unknown>;
  occurredAt?: Date;
}

/**
 * The cursor of a device's history (newest first): the id of the last entry seen, `h:<id>`.
 * Every reader of history (REST, GraphQL edges, the batched first pages) makes it here, so a
 * cursor from any of them continues the others.
 */
export const historyCursor = defineCursor<number>({
  write: (id) => `h:${id}`,
  read: (text) => {
    const id = /^h:(\d{1,15})$/.exec(text)?.[1];
    return id === undefined ? null : Number(id);
  },
});

export async function appendDeviceEvents(trx: Knex | Knex.Transaction, clock: Clock, events: NewDeviceEvent[]): Promise<void> {
  if (events.length === 0) return;
  const now = clock.now();
  // One JSON document for the whole batch, unpacked by PostgreSQL (as the outbox does). The query
  // builder's multi-row insert compiled and escaped five bind parameters per row, 25,000 per
  // chunk of 5,000: a reconnect storm's status changes cost Node more than the insert itself.
  // Ids (the history cursor) follow the order of the list.
  const rows = events.map((e) => ({ a: e.accountId, d: e.deviceId, t: e.type, x: e.data ?? {}, o: e.occurredAt ?? now }));
  await trx.raw(
    `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT (e ->> 'a')::uuid, (e ->> 'd')::uuid, e ->> 't', e -> 'x', (e ->> 'o')::timestamptz
       FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY AS r(e, ord)
      ORDER BY ord`,
    [JSON.stringify(rows)],
  );
}
