import type { Knex } from 'knex';

/**
 * Locks the account's row until the transaction ends: writes of one account that must not race
 * (two deploys over the same devices, two signing-key registrations) take turns on it.
 */
export async function lockAccount(trx: Knex.Transaction, accountId: string): Promise<void> {
  await trx('accounts').where({ id: accountId }).forUpdate().first('id');
}
