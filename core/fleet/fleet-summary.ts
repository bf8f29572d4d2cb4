import type { DeviceStatus } from '../devices/device-types';

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
}

/** Adds up groups of (model, firmware, status) into the dashboard's totals. */
export function summarizeFleet(
  groups: Array<{ model: string; firmware: string | null; status: DeviceStatus; count: number }>,
): FleetCounts {
  const byStatus: Record<DeviceStatus, number> = { online: 0, offline: 0, updating: 0 };
  const byModel = new Map<string, number>();
  const byFirmware = new Map<string | null, number>();
  let total = 0;
  for (const g of groups) {
    total += g.count;
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
  };
}
