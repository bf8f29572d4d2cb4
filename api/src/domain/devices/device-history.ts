import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';

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

export async function appendDeviceEvents(trx: Knex | Knex.Transaction, clock: Clock, events: NewDeviceEvent[]): Promise<void> {
  if (events.length === 0) return;
  const now = clock.now();
  for (let i = 0; i < events.length; i += 5000) {
    await trx('device_events').insert(
      events.slice(i, i + 5000).map((e) => ({
        account_id: e.accountId,
        device_id: e.deviceId,
        type: e.type,
        data: JSON.stringify(e.data ?? {}),
        occurred_at: e.occurredAt ?? now,
      })),
    );
  }
}
