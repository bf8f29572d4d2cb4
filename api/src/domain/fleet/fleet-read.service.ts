import type { ServiceDeps } from '../service-deps';
import type { Actor } from '../shared/actor';
import { isUuid } from '../shared/ids';
import type { AllocationService } from '../accounts/allocation.service';
import type { Device, DeviceHistoryEntry } from '../devices/device-types';
import { historyCursor } from '../devices/device-history';
import { selectDevicesByIds } from '../devices/store/devices.store';

export interface FleetSummary {
  total: number;
  online: number;
  offline: number;
  updating: number;
  byModel: Array<{ model: string; count: number }>;
  byFirmware: Array<{ firmware: string | null; count: number }>;
  quota: number;
  provisioned: number;
  budget: { amountMinor: number; spentMinor: number; currency: string };
}

/** Most devices re-read in one statement by live views. */
const MAX_IDS = 5000;

/**
 * Read models of the whole fleet: the dashboard's summary (one grouped statement plus the
 * allocation the REST /allocation answer uses) and batched device re-reads for live views.
 * Scoped to the actor's account like every other read.
 */
export class FleetReadService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: { allocation: AllocationService },
  ) {}

  async summary(actor: Actor): Promise<FleetSummary> {
    const [groups, allocation] = await Promise.all([
      this.deps
        .knex('devices as d')
        .join('models as m', 'm.id', 'd.model_id')
        .where('d.account_id', actor.accountId)
        .groupBy('m.name', 'd.firmware', 'd.status')
        .select('m.name as model', 'd.firmware', 'd.status')
        .count<Array<{ model: string; firmware: string | null; status: string; count: string }>>('* as count'),
      this.area.allocation.get(actor),
    ]);
    const byStatus = { online: 0, offline: 0, updating: 0 } as Record<string, number>;
    const byModel = new Map<string, number>();
    const byFirmware = new Map<string | null, number>();
    let total = 0;
    for (const g of groups) {
      const n = Number(g.count);
      total += n;
      byStatus[g.status] = (byStatus[g.status] ?? 0) + n;
      byModel.set(g.model, (byModel.get(g.model) ?? 0) + n);
      byFirmware.set(g.firmware, (byFirmware.get(g.firmware) ?? 0) + n);
    }
    return {
      total,
      online: byStatus.online ?? 0,
      offline: byStatus.offline ?? 0,
      updating: byStatus.updating ?? 0,
      byModel: [...byModel].map(([model, count]) => ({ model, count })).sort((a, b) => b.count - a.count || a.model.localeCompare(b.model)),
      byFirmware: [...byFirmware].map(([firmware, count]) => ({ firmware, count })).sort((a, b) => b.count - a.count || String(a.firmware).localeCompare(String(b.firmware))),
      quota: allocation.quota,
      provisioned: allocation.provisioned,
      budget: { amountMinor: allocation.budget.amountMinor, spentMinor: allocation.budget.spentMinor, currency: allocation.budget.currency },
    };
  }

  /**
   * The newest `limit` history entries of each of these devices in ONE statement (a list page
   * asking for every device's recent history must not run a query per device). Same entries,
   * order and cursor format as DeviceService.history's first page.
   */
  async historyHeads(actor: Actor, input: { deviceIds: string[]; limit: number }): Promise<Map<string, { events: DeviceHistoryEntry[]; nextCursor: string | null }>> {
    const ids = [...new Set(input.deviceIds.filter(isUuid))];
    const out = new Map<string, { events: DeviceHistoryEntry[]; nextCursor: string | null }>();
    if (ids.length === 0) return out;
    const rows = (await this.deps.knex.raw(
      `SELECT id, device_id, type, data, occurred_at FROM (
         SELECT e.*, row_number() OVER (PARTITION BY e.device_id ORDER BY e.id DESC) AS rn
           FROM device_events e WHERE e.account_id = ? AND e.device_id = ANY(?::uuid[])) ranked
        WHERE rn <= ? ORDER BY device_id, id DESC`,
      [actor.accountId, ids, input.limit + 1] as unknown as readonly string[],
    )) as { rows: Array<{ id: number; device_id: string; type: string; data: Record<string, unknown>; occurred_at: Date }> };
    for (const id of ids) out.set(id, { events: [], nextCursor: null });
    for (const r of rows.rows) {
      const entry = out.get(r.device_id)!;
      if (entry.events.length === input.limit) {
        const last = entry.events[entry.events.length - 1]!;
        entry.nextCursor = historyCursor.encode(last.id);
        continue;
      }
      entry.events.push({ id: Number(r.id), type: r.type, occurredAt: new Date(r.occurred_at).toISOString(), data: r.data });
    }
    return out;
  }

  /** Devices of the actor's account among these ids (others' ids and unknown ids are simply absent). */
  async devicesByIds(actor: Actor, ids: string[]): Promise<Device[]> {
    const valid = [...new Set(ids.filter(isUuid))].slice(0, MAX_IDS);
    return selectDevicesByIds(this.deps.knex, { accountId: actor.accountId, ids: valid });
  }
}
