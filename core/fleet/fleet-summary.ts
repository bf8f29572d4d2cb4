import type { DeviceStatus } from '../devices/device-types';
import type { SiteRef } from '../sites/site-types';

/** Devices of one site (null: devices without a site), by status. */
export interface SiteCount {
  site: SiteRef | null;
  count: number;
  online: number;
  offline: number;
  updating: number;
}

/** Device counts of a fleet by status, model and installed firmware. */
export interface FleetCounts {
  total: number;
  online: number;
  offline: number;
  updating: number;
  /** Largest first; equal counts by model name. */
  byModel: Array<{ model: string; count: number }>;
  /** Largest first; equal counts by version text (never reported: null, sorted as "null"). */
  byFirmware: Array<{ firmware: string | null; count: number }>;
  /** Largest first; equal counts by site name, devices without a site after the sites. */
  bySite: SiteCount[];
}

/** Adds up groups of (model, firmware, status) into the dashboard's totals. */
export function summarizeFleet(
  groups: Array<{
    model: string;
    firmware: string | null;
    status: DeviceStatus;
    count: number;
    site?: SiteRef | null;
  }>,
): FleetCounts {
  const byStatus: Record<DeviceStatus, number> = { online: 0, offline: 0, updating: 0 };
  const byModel = new Map<string, number>();
  const byFirmware = new Map<string | null, number>();
  const bySite = new Map<string | null, SiteCount>();
  let total = 0;
  for (const g of groups) {
    total += g.count;
    const key = g.site?.id ?? null;
    const site = bySite.get(key) ?? { site: g.site ?? null, count: 0, online: 0, offline: 0, updating: 0 };
    site.count += g.count;
    site[g.status] += g.count;
    bySite.set(key, site);
    byStatus[g.status] += g.count;
    byModel.set(g.model, (byModel.get(g.model) ?? 0) + g.count);
    byFirmware.set(g.firmware, (byFirmware.get(g.firmware) ?? 0) + g.count);
  }
  return {
    total,
    online: byStatus.online,
    offline: byStatus.offline,
    updating: byStatus.updating,
    byModel: [...byModel]
      .map(([model, count]) => ({ model, count }))
      .sort((a, b) => b.count - a.count || a.model.localeCompare(b.model)),
    byFirmware: [...byFirmware]
      .map(([firmware, count]) => ({ firmware, count }))
      .sort((a, b) => b.count - a.count || String(a.firmware).localeCompare(String(b.firmware))),
    bySite: [...bySite.values()].sort(
      (a, b) =>
        Number(a.site === null) - Number(b.site === null) ||
        b.count - a.count ||
        (a.site?.name ?? '').localeCompare(b.site?.name ?? ''),
    ),
  };
}
