import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import type { Actor } from '../shared/actor';
import { notFound } from '../shared/errors';
import { appendEvents } from '../events/outbox';
import type { LockedAccount } from './account-types';
import {
  allocationOf,
  claimChargeMinor,
  thresholdEvents,
  thresholdsReached,
  usageAfterClaim,
  type Allocation,
  type Threshold,
} from './allocation-rules';
import { findAccount, lockAccountForClaim } from './store/accounts.store';
import {
  insertClaimCharge,
  provisionedCount,
  recordThresholdsReached,
  spentMinor,
  thresholdsReachedAt,
} from './store/allocation.store';
import type { Db } from '../db/db';

export type { Allocation, ThresholdKind } from './allocation-rules';
export type { LockedAccount } from './account-types';

/**
 * Allocation: the device quota and the budget of an account, the ledger of charges, and the
 * thresholds announced once each (the rules are in allocation-rules.ts).
 */

export interface AllocationSnapshot {
  account: LockedAccount;
  provisioned: number;
  spentMinor: number;
}

export class AllocationService {
  constructor(private readonly deps: ServiceDeps) {}

  /** `db`: pass the transaction to read inside a unit of work (a claim's own answer). */
  async get(actor: Actor, db: Db = this.deps.knex): Promise<Allocation> {
    const account = await findAccount(db, actor.accountId);
    if (!account) throw notFound('Account');
    // A transaction is one connection: its queries run one after the other; outside, in parallel.
    const [provisioned, spent, reached] =
      db === this.deps.knex
        ? await Promise.all([
            provisionedCount(db, actor.accountId),
            spentMinor(db, actor.accountId),
            thresholdsReachedAt(db, actor.accountId),
          ])
        : [
            await provisionedCount(db, actor.accountId),
            await spentMinor(db, actor.accountId),
            await thresholdsReachedAt(db, actor.accountId),
          ];
    return allocationOf(account, { provisioned, spentMinor: spent }, reached);
  }

  /**
   * Locks the account row for the rest of the transaction (`FOR UPDATE`): concurrent claims of
   * one account run one after the other from here, so quota and budget checks cannot race.
   */
  async lockForClaim(trx: Knex.Transaction, accountId: string): Promise<AllocationSnapshot> {
    const account = await lockAccountForClaim(trx, accountId);
    if (!account) throw notFound('Account');
    const [provisioned, spent] = [await provisionedCount(trx, accountId), await spentMinor(trx, accountId)];
    return { account, provisioned, spentMinor: spent };
  }

  /**
   * Records the charge of a claim (one ledger row) and announces each threshold the claim made
   * reached for the first time. Call after the devices were inserted, in the same transaction.
   */
  async chargeClaim(
    trx: Knex.Transaction,
    input: { snapshot: AllocationSnapshot; devices: number; reference: string },
  ): Promise<{ amountMinor: number; thresholdsReached: Threshold[] }> {
    const { account } = input.snapshot;
    const amountMinor = claimChargeMinor(account, input.devices);
    const now = this.deps.clock.now();
    await insertClaimCharge(trx, {
      accountId: account.id,
      amountMinor,
      devices: input.devices,
      reference: input.reference,
      createdAt: now,
    });
    const usage = usageAfterClaim(input.snapshot, { devices: input.devices, amountMinor });
    const candidates = thresholdsReached(account, usage);
    if (candidates.length === 0) return { amountMinor, thresholdsReached: [] };
    const firstReached = await recordThresholdsReached(trx, {
      accountId: account.id,
      thresholds: candidates,
      reachedAt: now,
    });
    await appendEvents(trx, this.deps.clock, thresholdEvents(account, usage, firstReached));
    return { amountMinor, thresholdsReached: firstReached };
  }
}
