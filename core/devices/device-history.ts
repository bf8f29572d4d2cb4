import { defineCursor, keysetPage } from '../shared/cursor';
import type { DeviceHistoryEntry } from './device-types';

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
  /** A planned rotation started: a new password was created, or a certificate issued from the device's CSR. */
  'credentials_rotation_started',
  'certificate_issued',
  'certificate_revoked',
  'renamed',
  'tags_changed',
  'update_step',
  /** Assigned to a site, moved to another, or unassigned (`from` site id, `to` {id, name} or null). */
  'site_changed',
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

/** A page of history from entries fetched with `limit + 1` (a device's page and the batched first pages alike). */
export interface HistoryPage {
  events: DeviceHistoryEntry[];
  /** The cursor of each entry, aligned with `events`. */
  cursors: string[];
  nextCursor: string | null;
}

export function historyPage(entries: DeviceHistoryEntry[], limit: number): HistoryPage {
  const { items, cursors, nextCursor } = keysetPage(entries, limit, (e) => historyCursor.encode(e.id));
  return { events: items, cursors, nextCursor };
}
