import type { Knex } from 'knex';

/**
 * Webhook delivery lookups: the worker's ordering check ("no earlier pending delivery of the
 * same subject for this endpoint") and the delivery log paged newest first.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX webhook_deliveries_pending_order ON webhook_deliveries (webhook_id, ordering_key, event_seq) WHERE status = 'pending'`,
  );
  await knex.raw('CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, event_seq DESC, id DESC)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS webhook_deliveries_log');
  await knex.raw('DROP INDEX IF EXISTS webhook_deliveries_pending_order');
}
