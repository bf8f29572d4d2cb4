import type { Knex } from 'knex';

/**
 * Delta images (docs/ota.md "Delta images").
 *
 * - `firmware_deltas`: the cache of built deltas, shared by every process of a cluster. A delta
 *   is a function of two images and a format, so it is keyed by content, (from_sha256, to_sha256,
 *   format), not by account or version: the unique key is also what makes a build happen once,
 *   whichever process inserts the row first builds it (`building`), the others wait for `ready`.
 *   `too_large` and `failed` are remembered too, so no process tries again for ever. The file
 *   lives in firmware storage under `storage_key`, like firmware binaries.
 * - `device_updates.delta_id`: the delta the update's last command offered (null: the full image
 *   only); the deployment's bytes sent count its size instead of the image's.
 * - `device_updates.delta_refused`: the device reported `delta_apply` once; every later command of
 *   this update carries the full image only (no second fallback, no loop); `delta_id` keeps the
 *   delta it tried.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('firmware_deltas', (t) => {
    t.uuid('id').primary();
    t.text('from_sha256').notNullable();
    t.text('to_sha256').notNullable();
    t.text('format').notNullable();
    t.text('status').notNullable();
    t.text('storage_key');
    t.bigInteger('size');
    t.text('sha256');
    t.bigInteger('from_size').notNullable();
    t.bigInteger('to_size').notNullable();
    t.integer('build_ms');
    t.text('error');
    t.timestamp('claimed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('built_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['from_sha256', 'to_sha256', 'format']);
  });
  await knex.raw(
    "ALTER TABLE firmware_deltas ADD CONSTRAINT firmware_deltas_status CHECK (status IN ('building','ready','too_large','failed'))",
  );
  await knex.raw(
    'ALTER TABLE device_updates ADD COLUMN delta_id uuid REFERENCES firmware_deltas(id) ON DELETE SET NULL',
  );
  await knex.raw('ALTER TABLE device_updates ADD COLUMN delta_refused boolean NOT NULL DEFAULT false');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE device_updates DROP COLUMN delta_refused');
  await knex.raw('ALTER TABLE device_updates DROP COLUMN delta_id');
  await knex.schema.dropTable('firmware_deltas');
}
