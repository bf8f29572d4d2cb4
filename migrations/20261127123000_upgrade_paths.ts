import type { Knex } from 'knex';

/**
 * Upgrade paths (docs/ota.md "Upgrade paths", issue 28).
 * - `firmware_versions.upgrade_from`: the range of versions that may install this one directly
 *   (semver range syntax over our version order); NULL = any version.
 * - On `device_updates`, one row per hop of a planned path, all in the same deployment:
 *   `final_version` / `final_firmware_version_id` name where the path ends (NULL for an ordinary
 *   one-hop update), `hop` / `hop_count` its place in the path, `origin_version` the version the
 *   device had before the path's first hop (what a rollback returns to), `next_hop_id` the row
 *   that took over once this hop succeeded: such a row is history, not the device's state, and
 *   every count leaves it out.
 * Nullable columns without defaults: adding them rewrites nothing.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE firmware_versions ADD COLUMN upgrade_from text');
  await knex.raw(`ALTER TABLE device_updates
    ADD COLUMN final_version text,
    ADD COLUMN final_firmware_version_id uuid,
    ADD COLUMN hop integer,
    ADD COLUMN hop_count integer,
    ADD COLUMN origin_version text,
    ADD COLUMN next_hop_id uuid`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE device_updates
    DROP COLUMN final_version,
    DROP COLUMN final_firmware_version_id,
    DROP COLUMN hop,
    DROP COLUMN hop_count,
    DROP COLUMN origin_version,
    DROP COLUMN next_hop_id`);
  await knex.raw('ALTER TABLE firmware_versions DROP COLUMN upgrade_from');
}
