import type { Knex } from 'knex';

/**
 * Luminaire data (docs/luminaire-data.md): every D4i reading a device sends, and roll-ups that
 * last years. Time-partitioned (PARTITION BY RANGE), so expiry drops whole partitions instead of
 * deleting rows one by one; the partitions themselves are made and dropped by the housekeeping
 * job (core/luminaire/luminaire-partitions.ts), which also runs at every start.
 *
 * - `luminaire_points`: the raw readings, one partition per UTC day (default 30 days kept).
 * - `luminaire_hourly`: per device, hour and attribution, one partition per month (1 year kept).
 * - `luminaire_daily`: the same per day, one partition per year, kept as long as the account.
 * - `luminaire_fleet_daily`: energy per account, day and attribution (what fleet energy reads).
 * - `luminaire_fleet_daily_tags`: energy per account, tag, day and tag value: each reading counts
 *   under every tag its device had then (grouping by a tag reads only that tag's rows).
 * - `luminaire_attributions`: what a device was when a reading was taken (model, firmware,
 *   site), shared by the roll-ups so a later upgrade does not rewrite history. Tags are kept
 *   apart (above): in attributions they would multiply their number by every tag combination.
 * - `luminaire_state`: per device, the latest values, each counter's segment, refusals.
 *
 * No foreign keys on the series: a check per inserted row costs CPU on the hot path, and the
 * roll-ups outlive the device (fleet energy keeps an unclaimed device's past). Same SQL on
 * PostgreSQL and PGlite (declarative partitioning works in both).
 */
const ROLLUP_COLUMNS = `
  device_id uuid NOT NULL,
  bucket timestamptz NOT NULL,
  attribution_id bigint NOT NULL,
  account_id uuid NOT NULL,
  points integer NOT NULL,
  energy_wh double precision NOT NULL DEFAULT 0,
  lifetime_energy_wh double precision,
  lifetime_burn_s bigint,
  power_sum double precision NOT NULL DEFAULT 0,
  power_n integer NOT NULL DEFAULT 0,
  power_max real,
  gear_temp_sum double precision NOT NULL DEFAULT 0,
  gear_temp_n integer NOT NULL DEFAULT 0,
  gear_temp_max real,
  source_temp_sum double precision NOT NULL DEFAULT 0,
  source_temp_n integer NOT NULL DEFAULT 0,
  source_temp_max real,
  output_sum double precision NOT NULL DEFAULT 0,
  output_n integer NOT NULL DEFAULT 0,
  supply_voltage_min real,
  supply_voltage_max real,
  gear_operating_s bigint NOT NULL DEFAULT 0,
  gear_starts bigint NOT NULL DEFAULT 0,
  gear_thermal_derating bigint NOT NULL DEFAULT 0,
  gear_thermal_shutdown bigint NOT NULL DEFAULT 0,
  supply_undervoltage bigint NOT NULL DEFAULT 0,
  supply_overvoltage bigint NOT NULL DEFAULT 0,
  source_on_s bigint NOT NULL DEFAULT 0,
  source_starts bigint NOT NULL DEFAULT 0,
  source_failures bigint NOT NULL DEFAULT 0,
  counter_resets integer NOT NULL DEFAULT 0,
  PRIMARY KEY (device_id, bucket, attribution_id)`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE luminaire_points (
    device_id uuid NOT NULL,
    at timestamptz NOT NULL,
    bad_clock boolean NOT NULL DEFAULT false,
    energy_wh double precision,
    lifetime_energy_wh double precision,
    power_w real,
    gear_operating_s bigint,
    gear_starts bigint,
    gear_temp_c real,
    gear_thermal_derating bigint,
    gear_thermal_shutdown bigint,
    supply_voltage_v real,
    supply_undervoltage bigint,
    supply_overvoltage bigint,
    source_on_s bigint,
    source_starts bigint,
    source_temp_c real,
    source_failures bigint,
    output_level_pct real,
    rated_life_h integer,
    -- A reading of a good clock and one stamped with its receipt time never take each other's key.
    PRIMARY KEY (device_id, at, bad_clock)
  ) PARTITION BY RANGE (at)`);
  await knex.raw(`CREATE TABLE luminaire_hourly (${ROLLUP_COLUMNS}) PARTITION BY RANGE (bucket)`);
  await knex.raw(`CREATE TABLE luminaire_daily (${ROLLUP_COLUMNS}) PARTITION BY RANGE (bucket)`);
  await knex.raw(`CREATE TABLE luminaire_fleet_daily (
    account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    day date NOT NULL,
    attribution_id bigint NOT NULL,
    energy_wh double precision NOT NULL DEFAULT 0,
    points integer NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day, attribution_id)
  )`);
  await knex.raw(`CREATE TABLE luminaire_fleet_daily_tags (
    account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    tag_key text NOT NULL,
    day date NOT NULL,
    tag_value text NOT NULL,
    energy_wh double precision NOT NULL DEFAULT 0,
    points integer NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, tag_key, day, tag_value)
  )`);
  await knex.raw(`CREATE TABLE luminaire_attributions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    model text NOT NULL,
    firmware text,
    site_id uuid,
    fingerprint text NOT NULL,
    UNIQUE (account_id, fingerprint)
  )`);
  await knex.raw(`CREATE TABLE luminaire_state (
    device_id uuid PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    account_id uuid NOT NULL,
    latest jsonb NOT NULL DEFAULT '{}',
    latest_at timestamptz,
    counters jsonb NOT NULL DEFAULT '{}',
    counter_resets integer NOT NULL DEFAULT 0,
    points bigint NOT NULL DEFAULT 0,
    bad_clock_count bigint NOT NULL DEFAULT 0,
    last_bad_clock_at timestamptz,
    refused_fields jsonb NOT NULL DEFAULT '{}'
  )`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'luminaire_fleet_daily_tags',
    'luminaire_state',
    'luminaire_attributions',
    'luminaire_fleet_daily',
    'luminaire_daily',
    'luminaire_hourly',
    'luminaire_points',
  ])
    await knex.raw(`DROP TABLE IF EXISTS ${table}`);
}
