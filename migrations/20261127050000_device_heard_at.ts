import type { Knex } from 'knex';

/**
 * Two clocks for a device (docs/device-protocol.md, "Presence and status"): `last_seen` is the
 * time of its last heartbeat (the owner's specification), and `heard_at` the time of its last
 * sign of life (a connection, a heartbeat, a status `online`), which every presence deadline
 * and sweep uses. Until now `last_seen` was both, so `heard_at` starts from it.
 *
 * Not indexed: the heartbeat flush rewrites it for every device it writes, and a flush that
 * changes no indexed column stays a HOT update (see 20261123010000_heartbeat_hot_updates; the
 * sweep scans the `offline_after` lower bound and checks `heard_at` per candidate).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE devices ADD COLUMN heard_at timestamptz');
  await knex.raw('UPDATE devices SET heard_at = last_seen WHERE last_seen IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE devices DROP COLUMN heard_at');
}
