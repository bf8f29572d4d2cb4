import type { Knex } from 'knex';
import type { Threshold, ThresholdKind } from '../allocation-rules';
import type { Db } from '../../db/db';

/** Devices the account has claimed now (its quota use). */
export async function provisionedCount(db: Db, accountId: string): Promise<number> {
  const row = (await db('devices').where({ account_id: accountId }).count<{ count: string }[]>('* as count'))[0];
  return Number(row?.count ?? 0);
}

/** The sum of the account's ledger (its budget use), minor units. */
export async function spentMinor(db: Db, accountId: string): Promise<number> {
  const row = (
    await db('ledger_entries').where({ account_id: accountId }).sum<{ sum: string | null }[]>('amount_minor as sum')
  )[0];
  return Number(row?.sum ?? 0);
}

export async function insertClaimCharge(
  db: Db,
  charge: { accountId: string; amountMinor: number; devices: number; reference: string; createdAt: Date },
): Promise<void> {
  await db('ledger_entries').insert({
    account_id: charge.accountId,
    kind: 'claim_charge',
    amount_minor: charge.amountMinor,
    devices: charge.devices,
    reference: charge.reference,
    created_at: charge.createdAt,
  });
}

interface ThresholdReachedRow {
  kind: ThresholdKind;
  percent: number;
  reached_at: Date;
}

export async function thresholdsReachedAt(
  db: Db,
  accountId: string,
): Promise<Array<Threshold & { reachedAt: string }>> {
  const rows = (await db('allocation_thresholds_reached').where({ account_id: accountId })) as ThresholdReachedRow[];
  return rows.map((r) => ({ kind: r.kind, percent: r.percent, reachedAt: new Date(r.reached_at).toISOString() }));
}

/**
 * Records the thresholds as reached; answers those not recorded before. The primary key
 * (account, kind, percent) is the guard that announces each threshold exactly once.
 */
export async function recordThresholdsReached(
  trx: Knex.Transaction,
  input: { accountId: string; thresholds: Threshold[]; reachedAt: Date },
): Promise<Threshold[]> {
  const inserted = await trx('allocation_thresholds_reached')
    .insert(
      input.thresholds.map((c) => ({
        account_id: input.accountId,
        kind: c.kind,
        percent: c.percent,
        reached_at: input.reachedAt,
      })),
    )
    .onConflict(['account_id', 'kind', 'percent'])
    .ignore()
    .returning<Array<{ kind: ThresholdKind; percent: number }>>(['kind', 'percent']);
  return inserted.map((r) => ({ kind: r.kind, percent: r.percent }));
}
