import type { Knex } from 'knex';

/**
 * Presence deadline: the moment an online device counts as offline when nothing more arrives
 * (3 of its own heartbeat intervals after it was last heard). Written by the same batched
 * statement that records heartbeats, so the periodic sweep is one indexed range scan
 * (`offline_after < now`) instead of arithmetic on every online row.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('devices', (t) => {
    t.timestamp('offline_after', { useTz: true });
  });
  await knex.raw("CREATE INDEX devices_online_offline_after ON devices (offline_after) WHERE connectivity = 'online'");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS devices_online_offline_after');
  await knex.schema.alterTable('devices', (t) => {
    t.dropColumn('offline_after');
  });
}
