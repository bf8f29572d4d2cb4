import type { Knex } from 'knex';

/**
 * Retention (core/housekeeping/retention.service.ts) deletes an event together with its
 * webhook deliveries, found by the event's sequence number: without this index each window of
 * pruned events would scan every delivery.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX IF NOT EXISTS webhook_deliveries_event_seq ON webhook_deliveries (event_seq)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS webhook_deliveries_event_seq');
}
