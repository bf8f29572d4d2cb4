import { defineCursor, type CursorCodec } from '../shared/cursor';
import { isValidSerial, type DeviceStatus } from './device-types';

/** What a device list can be narrowed to; every field optional, all given ones must match. */
export interface DeviceFilter {
  /** Registered model name (exact). An unknown name matches nothing. */
  model?: string | undefined;
  status?: DeviceStatus | undefined;
  /** Installed version, exact string. */
  firmware?: string | undefined;
  /**
   * Installed version older than this one (compared as versions via firmware_key). A device that
   * never reported counts as running the version its claim installs; one claimed without a
   * firmware is not matched.
   */
  firmwareLt?: string | undefined;
  /** Case-insensitive substring of serial or name. */
  q?: string | undefined;
  /** Site id, or site name (case-insensitive). An unknown site matches nothing. */
  site?: string | undefined;
}

/**
 * A search matching at most this many devices reads its matches from the search terms and sorts
 * them rather than walking the serial index (DevicePageQuery.fewMatches).
 */
export const FEW_MATCHES = 2000;

/** Columns a device list can be ordered by (serial breaks ties, so every order is total). */
export const DEVICE_SORT_FIELDS = ['serial', 'name', 'model', 'firmware', 'status', 'last_seen', 'ip'] as const;
export type DeviceSortField = (typeof DEVICE_SORT_FIELDS)[number];
export interface DeviceSort {
  field: DeviceSortField;
  direction: 'asc' | 'desc';
}
export const DEFAULT_DEVICE_SORT: DeviceSort = { field: 'serial', direction: 'asc' };

/** Where a page ends: the last row's serial and its key in the page's order. */
export interface DeviceListPosition {
  serial: string;
  /** The row's sort key as text (the serial itself in serial order). */
  sortKey: string;
}

/** Longest sort key a cursor may carry (a name of 200 characters, lower-cased, fits). */
const MAX_SORT_KEY = 400;

const serialAscending = defineCursor<DeviceListPosition>({
  write: ({ serial }) => `s:${serial}`,
  read: (text) => {
    const serial = text.startsWith('s:') ? text.slice(2) : '';
    return isValidSerial(serial) ? { serial, sortKey: serial } : null;
  },
});

/**
 * The keyset cursor of a device list in one order. Serial ascending (the default) keeps its
 * original form `s:<serial>`; other orders carry the order and the sort key (`k:[field,
 * direction, key, serial]`), so a cursor made in one order is refused in another instead of
 * skipping rows.
 */
export function deviceListCursor(sort: DeviceSort = DEFAULT_DEVICE_SORT): CursorCodec<DeviceListPosition> {
  if (sort.field === 'serial' && sort.direction === 'asc') return serialAscending;
  return defineCursor<DeviceListPosition>({
    write: ({ serial, sortKey }) => `k:${JSON.stringify([sort.field, sort.direction, sortKey, serial])}`,
    read: (text) => {
      let parsed: unknown;
      try {
        parsed = text.startsWith('k:') ? JSON.parse(text.slice(2)) : null;
      } catch {
        return null;
      }
      if (!Array.isArray(parsed) || parsed.length !== 4) return null;
      const items: unknown[] = parsed;
      const [field, direction, sortKey, serial] = items;
      if (
        field !== sort.field ||
        direction !== sort.direction ||
        typeof sortKey !== 'string' ||
        sortKey.length > MAX_SORT_KEY ||
        !isValidSerial(serial)
      )
        return null;
      return { serial, sortKey };
    },
  });
}
