import type { Knex } from 'knex';

/**
 * Who made the request an idempotency key belongs to (`user:<id>` or `api_key:<id>`). A stored
 * answer can hold secrets shown once (a claim's device passwords) and keys are often guessable
 * (a line numbers its batches), so an answer is replayed only to the principal that made the
 * first request. Rows from before this column have no principal and are replayed to nobody
 * (they expire within 24 hours).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('idempotency_keys', (t) => {
    t.text('principal');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('idempotency_keys', (t) => {
    t.dropColumn('principal');
  });
}
