import type { Knex } from 'knex';

/**
 * The outbox's undispatched events in a queue of their own (`events_pending`, one key per
 * event) instead of `events.dispatched_at` and its partial index. Marking a batch dispatched was
 * an UPDATE of every event row: a new row version (the column is in the partial index's
 * predicate, so never a HOT update) with new entries in the table's three other indexes, and a
 * dead row for vacuum. A connection storm or an OTA dispatch writes an event per device. Now
 * `events` is only inserted into and pruned, and dispatching deletes the batch's keys.
 * Measured on one connection, 10,000 events in batches of 125 as a connection storm writes
 * them: claiming and marking cost 31-33 µs of wall time per event on PostgreSQL 15 against
 * 44-45 µs before, and 64-66 µs against 75-77 µs on the embedded database; inserting costs the
 * same. No foreign key to `events`: its per-row check cost more than the queue saves, and the
 * retention pass never deletes an event whose key is still queued.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE TABLE events_pending (seq bigint PRIMARY KEY)');
  await knex.raw('INSERT INTO events_pending (seq) SELECT seq FROM events WHERE dispatched_at IS NULL');
  await knex.raw('DROP INDEX IF EXISTS events_undispatched');
  await knex.raw('ALTER TABLE events DROP COLUMN dispatched_at');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE events ADD COLUMN dispatched_at timestamptz');
  await knex.raw(
    'UPDATE events e SET dispatched_at = now() WHERE NOT EXISTS (SELECT 1 FROM events_pending p WHERE p.seq = e.seq)',
  );
  await knex.raw('CREATE INDEX events_undispatched ON events (seq) WHERE dispatched_at IS NULL');
  await knex.raw('DROP TABLE events_pending');
}
