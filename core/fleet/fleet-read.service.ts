import type { ServiceDeps } from '../service-deps';
import type { Actor } from '../shared/actor';
import { isUuid } from '../shared/ids';
import type { AllocationService } from '../accounts/allocation.service';
import type { Device } from '../devices/device-types';
import { historyPage, type HistoryPage } from '../devices/device-history';
import { selectDevicesByIds, selectHistoryHeads } from '../devices/device-records';
import { summarizeFleet, type SiteCount } from './fleet-summary';
import { countDevicesByGroup } from './store/fleet.store';

export interface FleetSummary {
  total: number;
  online: number;
  offline: number;
  updating: number;
  byModel: Array<{ model: string; count: number }>;
  byFirmware: Array<{ firmware: string | null; count: number }>;
  bySite: SiteCount[];
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
      countDevicesByGroup(this.deps.knex, { accountId: actor.accountId }),
      this.area.allocation.get(actor),
    ]);
    return {
      ...summarizeFleet(groups),
      quota: allocation.quota,
      provisioned: allocation.provisioned,
      budget: {
        amountMinor: allocation.budget.amountMinor,
        spentMinor: allocation.budget.spentMinor,
        currency: allocation.budget.currency,
      },
    };
  }

  /**
   * The newest `limit` history entries of each of these devices in ONE statement (a list page
   * asking for every device's recent history must not run a query per device). Same entries,
   * order and cursor format as DeviceService.history's first page.
   */
  async historyHeads(actor: Actor, input: { deviceIds: string[]; limit: number }): Promise<Map<string, HistoryPage>> {
    const ids = [...new Set(input.deviceIds.filter(isUuid))];
    const out = new Map<string, HistoryPage>();
    if (ids.length === 0) return out;
    // One more than asked: its presence says whether a next page exists.
    const heads = await selectHistoryHeads(this.deps.knex, {
      accountId: actor.accountId,
      deviceIds: ids,
      limit: input.limit + 1,
    });
    for (const id of ids) out.set(id, historyPage(heads.get(id) ?? [], input.limit));
    return out;
  }

  /** Devices of the actor's account among these ids (others' ids and unknown ids are simply absent). */
  async devicesByIds(actor: Actor, ids: string[]): Promise<Device[]> {
    const valid = [...new Set(ids.filter(isUuid))].slice(0, MAX_IDS);
    return selectDevicesByIds(this.deps.knex, { accountId: actor.accountId, ids: valid });
  }
}
