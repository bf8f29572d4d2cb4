import type { MaintenanceWindow } from '../devices/device-config';
import { insideLocalWindow, isKnownTimeZone, type LocalWindow } from '../sites/site-schedule';

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

/** The site a device belongs to, as far as its window is concerned. */
export interface SiteWindow {
  timeZone: string;
  window: LocalWindow | null;
}

/** The window that governs a device, and the zone it is read in. */
export interface EffectiveWindow {
  window: LocalWindow;
  timeZone: string;
  source: 'device' | 'site';
}

type DeviceWindowConfig =
  { timezone?: string | null; maintenance_window?: MaintenanceWindow | null } | null | undefined;

/**
 * The device's own window overrides its site's (docs/ota.md "Maintenance windows"). A device
 * window is read in the device's own `timezone` when it has one, else in its site's zone, else
 * UTC; a site window is read in the site's zone. Null: the device is not restricted.
 */
export function effectiveWindow(
  config: DeviceWindowConfig,
  site: SiteWindow | null | undefined,
): EffectiveWindow | null {
  const own = config?.maintenance_window;
  if (own) {
    const zone = config.timezone && isKnownTimeZone(config.timezone) ? config.timezone : (site?.timeZone ?? 'UTC');
    return { window: own, timeZone: zone, source: 'device' };
  }
  if (site?.window) return { window: site.window, timeZone: site.timeZone, source: 'site' };
  return null;
}

/**
 * Whether `at` falls inside the device's local maintenance window [start, end) (its own, else
 * its site's), with the DST rules of core/sites/site-schedule.ts. A window whose end is before
 * its start spans midnight (22:00-04:00). A device without a window is not restricted; an
 * unknown zone counts as UTC (the API refuses unknown zones anyway).
 */
export function insideMaintenanceWindow(at: Date, config: DeviceWindowConfig, site?: SiteWindow | null): boolean {
  const effective = effectiveWindow(config, site);
  if (!effective) return true;
  return insideLocalWindow(effective.window, effective.timeZone, at);
}
