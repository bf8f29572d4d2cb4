import type { Knex } from 'knex';

/**
 * The account's locks that have not ended, found without reading other accounts' locks: each
 * view of a deployment starts its held updates from them (core/deployments/store/update-locks.store.ts).
 * A lock row stays with its device after it ends (it keeps the last duration test), so the table
 * grows toward one row per emergency fixture of every account.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX device_update_locks_account_until ON device_update_locks (account_id, until)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX device_update_locks_account_until');
}
