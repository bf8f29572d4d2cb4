import type { Knex } from 'knex';
import type { Account, LockedAccount } from '../account-types';
import type { Db } from '../../db/db';

interface AccountRow {
  id: string;
  name: string;
  quota: number;
  budget_minor: number | string;
  currency: string;
  unit_price_minor: number | string;
  thresholds: number[];
  created_at: Date;
}

type LockedAccountRow = Pick<
  AccountRow,
  'id' | 'quota' | 'budget_minor' | 'currency' | 'unit_price_minor' | 'thresholds'
>;

const toLockedAccount = (row: LockedAccountRow): LockedAccount => ({
  id: row.id,
  quota: row.quota,
  budgetMinor: Number(row.budget_minor),
  currency: row.currency,
  unitPriceMinor: Number(row.unit_price_minor),
  thresholds: row.thresholds,
});

const toAccount = (row: AccountRow): Account => ({
  ...toLockedAccount(row),
  name: row.name,
  createdAt: new Date(row.created_at).toISOString(),
});

export type NewAccount = Omit<Account, 'createdAt'>;

export async function insertAccount(db: Db, account: NewAccount): Promise<void> {
  await db('accounts').insert({
    id: account.id,
    name: account.name,
    quota: account.quota,
    budget_minor: account.budgetMinor,
    currency: account.currency,
    unit_price_minor: account.unitPriceMinor,
    thresholds: account.thresholds,
  });
}

export type AccountPatch = Partial<Pick<Account, 'quota' | 'budgetMinor' | 'currency' | 'unitPriceMinor' | 'name'>>;

/**
 * False when there is no such account. An empty patch issues nothing and answers true: the
 * caller's read that follows tells whether the account exists.
 */
export async function updateAccount(db: Db, input: { id: string; patch: AccountPatch }): Promise<boolean> {
  const { patch } = input;
  const row: Record<string, unknown> = {};
  if (patch.quota !== undefined) row.quota = patch.quota;
  if (patch.budgetMinor !== undefined) row.budget_minor = patch.budgetMinor;
  if (patch.currency !== undefined) row.currency = patch.currency;
  if (patch.unitPriceMinor !== undefined) row.unit_price_minor = patch.unitPriceMinor;
  if (patch.name !== undefined) row.name = patch.name;
  if (Object.keys(row).length === 0) return true;
  return (await db('accounts').where({ id: input.id }).update(row)) > 0;
}

export async function findAccount(db: Db, id: string): Promise<Account | null> {
  const row = (await db('accounts').where({ id }).first()) as AccountRow | undefined;
  return row ? toAccount(row) : null;
}

export async function listAccounts(db: Db): Promise<Account[]> {
  const rows = (await db('accounts').orderBy('created_at')) as AccountRow[];
  return rows.map(toAccount);
}

export async function countAccounts(db: Db): Promise<number> {
  const row = (await db('accounts').count<{ count: string }[]>('* as count'))[0];
  return Number(row?.count ?? 0);
}

/**
 * Locks the account row for the rest of the transaction (`FOR UPDATE`): concurrent claims of
 * one account run one after the other from here, so quota and budget checks cannot race.
 */
export async function lockAccountForClaim(trx: Knex.Transaction, id: string): Promise<LockedAccount | null> {
  const row = await trx('accounts')
    .where({ id })
    .forUpdate()
    .first<LockedAccountRow | undefined>('id', 'quota', 'budget_minor', 'currency', 'unit_price_minor', 'thresholds');
  return row ? toLockedAccount(row) : null;
}
