import type { Knex } from 'knex';

/**
 * Sites (docs/ota.md "Sites"): the buildings an account's devices live in, each with its own IANA
 * time zone, an optional maintenance window in local time (`{start:"HH:MM", end:"HH:MM"}`) and
 * update freezes as local date-time ranges (`[{from:"YYYY-MM-DDTHH:MM", to:..., reason?}]`).
 * Windows and freezes are stored as written (local wall-clock time) because their meaning must
 * follow the zone's DST rules on the day they are evaluated, not the offset of the day they were
 * saved.
 *
 * Names are unique per account ignoring case, so "Berlin HQ" and "berlin hq" cannot both exist
 * and a name is an unambiguous way to pick a site. Deleting a site unassigns its devices
 * (`ON DELETE SET NULL`); the service keeps `devices.site_id` within the device's own account.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('sites', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('time_zone').notNullable();
    t.text('address');
    t.text('customer_ref');
    t.jsonb('maintenance_window');
    t.jsonb('freezes').notNullable().defaultTo(knex.raw("'[]'::jsonb"));
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE UNIQUE INDEX sites_account_name ON sites (account_id, lower(name))');
  // Cursor pagination of the list walks (account_id, name, id).
  await knex.raw('CREATE INDEX sites_account_name_id ON sites (account_id, name, id)');
  await knex.raw('ALTER TABLE devices ADD COLUMN site_id uuid REFERENCES sites(id) ON DELETE SET NULL');
  await knex.raw('CREATE INDEX devices_account_site_serial ON devices (account_id, site_id, serial)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS devices_account_site_serial');
  await knex.raw('ALTER TABLE devices DROP COLUMN site_id');
  await knex.schema.dropTable('sites');
}
