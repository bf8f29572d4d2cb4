import type { Knex } from 'knex';

/**
 * What the service refused of each device's messages since its claim (docs/device-protocol.md,
 * "Refused messages and fields"): counts by reason, the last refused message, the refused
 * heartbeat fields, and a firmware value outside the version grammar. Written by the heartbeat
 * ingest's batched UPDATE (never one write per refused message). Constant defaults: adding the
 * columns rewrites no row.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE devices
    ADD COLUMN refused_messages jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN last_refused_message jsonb,
    ADD COLUMN refused_fields jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN firmware_reported_invalid text`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE devices
    DROP COLUMN refused_messages,
    DROP COLUMN last_refused_message,
    DROP COLUMN refused_fields,
    DROP COLUMN firmware_reported_invalid`);
}
