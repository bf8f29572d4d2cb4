import type { Knex } from 'knex';

/**
 * The global uniqueness of a serial kept by an index that cannot order a list.
 *
 * A device list walks one account's devices in serial order. With the serial's unique index
 * in the text operator class, PostgreSQL could take that order from it and filter by account
 * as it went, and it did whenever it estimated the account as most of the table (it chose it
 * for 20,000 and 100,000 devices in two accounts). Where another account's serials sort in
 * between, a page then read every row between them: the last page of 50 devices whose serials
 * sort among 100,000 of another account took 43-67 ms, whatever the plan (measured here).
 * `text_pattern_ops` keeps `=` (every lookup by serial, and the uniqueness of a claim) but no
 * `<` or `>`, so a page reads an index that starts with the account: 0.5-1.1 ms for that page.
 * It also makes each page statement's plan right for every account, so the list can keep one
 * plan per statement (core/db/database.ts, plannedOnce).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE UNIQUE INDEX devices_serial_unique_eq ON devices (serial text_pattern_ops)');
  await knex.raw('ALTER TABLE devices DROP CONSTRAINT devices_serial_unique');
  // The claim recognises a taken serial by this name (core/devices/claim.service.ts).
  await knex.raw('ALTER INDEX devices_serial_unique_eq RENAME TO devices_serial_unique');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX devices_serial_unique');
  await knex.raw('ALTER TABLE devices ADD CONSTRAINT devices_serial_unique UNIQUE (serial)');
}
