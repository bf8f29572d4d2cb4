import type { Knex } from 'knex';

/**
 * Fixture health and the firmware judged by it (docs/fixture-health.md, docs/ota.md "Health gate"):
 * - `models.health_thresholds`: a model's overrides of the health rules' defaults (null: defaults).
 * - `device_health`: each device's last verdict (state, reasons, urgency): the maintenance list
 *   reads it, and a change of state is what `device.health_changed` reports.
 * - `deployment_fixture_gate`: a deployment's last fixture-gate decision with its evidence, and
 *   when it paused the deployment (kept with the deployment).
 * - `warranty_records`: what an account needs for a warranty claim on a device it owned, kept
 *   past an unclaim until `keep_until` (unclaim + the warranty period): serial, model, claim
 *   dates and the firmware history (the device's updates are deleted with it). The series
 *   themselves are the daily roll-ups, which carry the account and outlive the device.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE models ADD COLUMN health_thresholds jsonb');
  await knex.raw(`CREATE TABLE device_health (
    device_id uuid PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    account_id uuid NOT NULL,
    state text NOT NULL,
    reasons jsonb NOT NULL DEFAULT '[]',
    urgency real NOT NULL DEFAULT 0,
    evaluated_at timestamptz NOT NULL,
    changed_at timestamptz NOT NULL
  )`);
  await knex.raw('CREATE INDEX device_health_account_urgency ON device_health (account_id, urgency DESC)');
  await knex.raw(`CREATE TABLE deployment_fixture_gate (
    deployment_id uuid PRIMARY KEY REFERENCES deployments(id) ON DELETE CASCADE,
    account_id uuid NOT NULL,
    decision jsonb NOT NULL,
    evaluated_at timestamptz NOT NULL,
    paused_at timestamptz
  )`);
  await knex.raw(`CREATE TABLE warranty_records (
    account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    device_id uuid NOT NULL,
    serial text NOT NULL,
    model text NOT NULL,
    claimed_at timestamptz NOT NULL,
    unclaimed_at timestamptz NOT NULL,
    keep_until timestamptz NOT NULL,
    firmware_history jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (account_id, device_id)
  )`);
  await knex.raw('CREATE INDEX warranty_records_serial ON warranty_records (account_id, serial)');
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['warranty_records', 'deployment_fixture_gate', 'device_health'])
    await knex.raw(`DROP TABLE IF EXISTS ${table}`);
  await knex.raw('ALTER TABLE models DROP COLUMN IF EXISTS health_thresholds');
}
