import DataLoader from 'dataloader';
import type { Actor } from '../domain/shared/actor';
import type { Services } from '../services';
import type { AccountRow } from '../domain/accounts/account.service';

/**
 * Per-request batching (one query per list, never one per row). Built for each operation with
 * the caller's actor, so a loader can only ever return the caller's own account's rows.
 */
export interface Loaders {
  account: DataLoader<string, AccountRow>;
}

export function createLoaders(actor: Actor, services: Services): Loaders {
  return {
    // Only the caller's own account is ever asked for; the loader dedupes viewer.account lookups.
    account: new DataLoader(async (ids) => Promise.all(ids.map(() => services.accounts.get(actor.accountId)))),
  };
}
