import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import type { Actor } from '../shared/actor';
import { notFound } from '../shared/errors';
import { fromMinor } from './money';
import { appendEvents } from '../../events/outbox';
import type { NewEvent } from '../../events/event-types';

/**
 * Allocation: the device quota and the budget of an account, the ledger of charges, and the
 * thresholds (default 80/90/100 % of quota and of budget) announced once each.
 *
 * - provisioned = devices currently claimed (unclaiming frees a quota slot);
 * - spent = sum of the ledger (unclaiming credits nothing: the charge stays);
 * - a threshold of `kind` at `percent` is reached when provisioned (or spent) >= percent % of
 *   quota (or budget); its row in allocation_thresholds_reached (primary key account, kind,
 *   percent) is the guard that emits `allocation.threshold_reached` exactly once.
 */

export type ThresholdKind = 'quota' | 'budget';

export interface Allocation {
  quota: number;
  provisioned: number;
  available: number;
  budget: { amountMinor: number; currency: string; spentMinor: number; remainingMinor: number };
  unitPriceMinor: number;
  thresholds: Array<{ kind: ThresholdKind; percent: number; reachedAt: string | null }>;
}

/** The account row as read (and locked) inside a claim. */
export interface LockedAccount {
  id: string;
  quota: number;
  budget_minor: number;
  currency: string;
  unit_price_minor: number;
  thresholds: number[];
}

export interface AllocationSnapshot {
  account: LockedAccount;
  provisioned: number;
  spentMinor: number;
}

type Db = Knex | Knex.Transaction;

async function provisionedCount(db: Db, accountId: string): Promise<number> {
  const row = (await db('devices').where({ account_id: accountId }).count<{ count: string }[]>('* as count'))[0];
  return Number(row?.count ?? 0);
}

async function spentMinor(db: Db, accountId: string): Promise<number> {
  const row = (await db('ledger_entries').where({ account_id: accountId }).sum<{ sum: string | null }[]>('amount_minor as sum'))[0];
  return Number(row?.sum ?? 0);
}

const reached = (value: number, limit: number, percent: number): boolean => limit > 0 && value * 100 >= limit * percent;

export class AllocationService {
  constructor(private readonly deps: ServiceDeps) {}

  /** `db`: pass the transaction to read inside a unit of work (a claim's own answer). */
  async get(actor: Actor, db: Db = this.deps.knex): Promise<Allocation> {
    const account = (await db('accounts').where({ id: actor.accountId }).first()) as LockedAccount | undefined;
    if (!account) throw notFound('Account');
    const thresholdRows = () =>
      db('allocation_thresholds_reached').where({ account_id: actor.accountId }) as Promise<Array<{ kind: ThresholdKind; percent: number; reached_at: Date }>>;
    // A transaction is one connection: its queries run one after the other; outside, in parallel.
    const [provisioned, spent, rows] =
      db === this.deps.knex
        ? await Promise.all([provisionedCount(db, actor.accountId), spentMinor(db, actor.accountId), thresholdRows()])
        : [await provisionedCount(db, actor.accountId), await spentMinor(db, actor.accountId), await thresholdRows()];
    const reachedAt = new Map(rows.map((r) => [`${r.kind}:${r.percent}`, new Date(r.reached_at).toISOString()]));
    const percents = [...account.thresholds].sort((a, b) => a - b);
    return {
      quota: account.quota,
      provisioned,
      available: Math.max(0, account.quota - provisioned),
      budget: {
        amountMinor: Number(account.budget_minor),
        currency: account.currency,
        spentMinor: spent,
        remainingMinor: Math.max(0, Number(account.budget_minor) - spent),
      },
      unitPriceMinor: Number(account.unit_price_minor),
      thresholds: (['quota', 'budget'] as const).flatMap((kind) =>
        percents.map((percent) => ({ kind, percent, reachedAt: reachedAt.get(`${kind}:${percent}`) ?? null })),
      ),
    };
  }

  /**
   * Locks the account row for the rest of the transaction (`FOR UPDATE`): concurrent claims of
   * one account run one after the other from here, so quota and budget checks cannot race.
   */
  async lockForClaim(trx: Knex.Transaction, accountId: string): Promise<AllocationSnapshot> {
    const account = (await trx('accounts')
      .where({ id: accountId })
      .forUpdate()
      .first('id', 'quota', 'budget_minor', 'currency', 'unit_price_minor', 'thresholds')) as LockedAccount | undefined;
    if (!account) throw notFound('Account');
    account.budget_minor = Number(account.budget_minor);
    account.unit_price_minor = Number(account.unit_price_minor);
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
  ): Promise<{ amountMinor: number; thresholdsReached: Array<{ kind: ThresholdKind; percent: number }> }> {
    const { account } = input.snapshot;
    const amountMinor = account.unit_price_minor * input.devices;
    const now = this.deps.clock.now();
    await trx('ledger_entries').insert({
      account_id: account.id,
      kind: 'claim_charge',
      amount_minor: amountMinor,
      devices: input.devices,
      reference: input.reference,
      created_at: now,
    });
    const provisioned = input.snapshot.provisioned + input.devices;
    const spent = input.snapshot.spentMinor + amountMinor;
    const candidates = account.thresholds.flatMap((percent) => [
      ...(reached(provisioned, account.quota, percent) ? [{ kind: 'quota' as const, percent }] : []),
      ...(reached(spent, account.budget_minor, percent) ? [{ kind: 'budget' as const, percent }] : []),
    ]);
    if (candidates.length === 0) return { amountMinor, thresholdsReached: [] };
    const inserted = (await trx('allocation_thresholds_reached')
      .insert(candidates.map((c) => ({ account_id: account.id, kind: c.kind, percent: c.percent, reached_at: now })))
      .onConflict(['account_id', 'kind', 'percent'])
      .ignore()
      .returning(['kind', 'percent'])) as Array<{ kind: ThresholdKind; percent: number }>;
    const events: NewEvent[] = inserted.map((t) => ({
      accountId: account.id,
      type: 'allocation.threshold_reached',
      subject: `${t.kind}:${t.percent}`,
      data:
        t.kind === 'quota'
          ? { kind: 'quota', percent: t.percent, quota: account.quota, provisioned }
          : { kind: 'budget', percent: t.percent, budget: fromMinor(account.budget_minor), spent: fromMinor(spent), currency: account.currency },
    }));
    await appendEvents(trx, this.deps.clock, events);
    return { amountMinor, thresholdsReached: inserted };
  }
}
