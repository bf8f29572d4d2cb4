import type { MaintenanceWindow } from '../devices/device-config';

const formatters = new Map<string, Intl.DateTimeFormat>();

/** Minutes since local midnight at `at` in `timeZone` (IANA), via Intl (no tz database of our own). */
export function localMinutes(at: Date, timeZone: string): number {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    formatters.set(timeZone, f);
  }
  const parts = f.formatToParts(at);
  const hour = Number(parts.find((p) => p.type === 'hour')?.value ?? 0);
  const minute = Number(parts.find((p) => p.type === 'minute')?.value ?? 0);
  return hour * 60 + minute;
}

const toMinutes = (hhmm: string): number => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/**
 * Whether `at` falls inside the device's local maintenance window [start, end). A window whose
 * end is before its start spans midnight (22:00-04:00). A device without a window is not
 * restricted; an unknown zone counts as UTC (the PATCH refuses unknown zones anyway).
 */
export function insideMaintenanceWindow(
  at: Date,
  config: { timezone?: string | null; maintenance_window?: MaintenanceWindow | null } | null | undefined,
): boolean {
  const window = config?.maintenance_window;
  if (!window) return true;
  let minutes: number;
  try {
    minutes = localMinutes(at, config.timezone || 'UTC');
  } catch {
    minutes = localMinutes(at, 'UTC');
  }
  const start = toMinutes(window.start);
  const end = toMinutes(window.end);
  return start < end ? minutes >= start && minutes < end : minutes >= start || minutes < end;
}
