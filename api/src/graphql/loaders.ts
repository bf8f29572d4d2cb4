import DataLoader from 'dataloader';
import type { Actor } from '#core/shared/actor';
import type { Services } from '#core/services';
import type { Account } from '#core/accounts/account.service';
import type { HistoryPage } from '#core/devices/device-history';
import type { LuminaireSummary } from '#core/luminaire/luminaire-types';
import type { DeviceHealthView } from '#core/health/health.service';

/**
 * Per-request batching (one query per list, never one per row). Built for each operation with
 * the caller's actor, so a loader can only ever return the caller's own account's rows.
 */
export interface Loaders {
  account: DataLoader<string, Account>;
  /** `${deviceId}|${limit}` -> that device's first history page (batched per limit). */
  historyHead: DataLoader<string, HistoryPage>;
  /** deviceId -> its luminaire summary (null before its first reading): one query per list of devices. */
  luminaire: DataLoader<string, LuminaireSummary | null>;
  /** deviceId -> its health verdict (null until the health pass judged it): one query per list of devices. */
  health: DataLoader<string, DeviceHealthView | null>;
}

export function createLoaders(actor: Actor, services: Services): Loaders {
  return {
    // Only the caller's own account is ever asked for; the loader dedupes viewer.account lookups.
    account: new DataLoader(async (ids) => Promise.all(ids.map(() => services.accounts.get(actor.accountId)))),
    historyHead: new DataLoader(async (keys) => {
      const byLimit = new Map<number, string[]>();
      for (const key of keys) {
        const [id, limit] = key.split('|') as [string, string];
        byLimit.set(Number(limit), [...(byLimit.get(Number(limit)) ?? []), id]);
      }
      const results = new Map<string, HistoryPage>();
      for (const [limit, deviceIds] of byLimit) {
        const heads = await services.fleet.historyHeads(actor, { deviceIds, limit });
        for (const [id, head] of heads) results.set(`${id}|${limit}`, head);
      }
      return keys.map((k) => results.get(k) ?? { events: [], cursors: [], nextCursor: null });
    }),
    luminaire: new DataLoader(async (deviceIds) => {
      const summaries = await services.luminaire.summaries(actor, { deviceIds: [...deviceIds] });
      return deviceIds.map((id) => summaries.get(id) ?? null);
    }),
    health: new DataLoader(async (deviceIds) => {
      const verdicts = await services.health.healthOf(actor, { deviceIds });
      return deviceIds.map((id) => verdicts.get(id) ?? null);
    }),
  };
}
