import type { Knex } from 'knex';
import type { EnergyGrouping } from '../luminaire-types';

/** Reads of the luminaire series; every query is bounded by a device of the caller's account or by the account itself. */

export interface RawPointRow {
  at: Date;
  bad_clock: boolean;
  [field: string]: unknown;
}

export async function selectRawPoints(
  knex: Knex,
  input: { deviceId: string; from: Date; to: Date; limit: number },
): Promise<RawPointRow[]> {
  const result = await knex.raw<{ rows: RawPointRow[] }>(
    `SELECT at, bad_clock, energy_wh, lifetime_energy_wh, power_w, gear_operating_s, gear_starts, gear_temp_c,
            gear_thermal_derating, gear_thermal_shutdown, supply_voltage_v, supply_undervoltage, supply_overvoltage,
            source_on_s, source_starts, source_temp_c, source_failures, output_level_pct, rated_life_h
       FROM luminaire_points WHERE device_id = ? AND at >= ? AND at < ? ORDER BY at LIMIT ?`,
    [input.deviceId, input.from, input.to, input.limit],
  );
  return result.rows;
}

export interface RollupReadRow {
  bucket: Date;
  points: string | number;
  energy_wh: string | number;
  lifetime_energy_wh: number | null;
  lifetime_burn_s: string | number | null;
  power_avg: number | null;
  power_max: number | null;
  gear_temp_avg: number | null;
  gear_temp_max: number | null;
  source_temp_avg: number | null;
  source_temp_max: number | null;
  output_avg: number | null;
  supply_voltage_min: number | null;
  supply_voltage_max: number | null;
  gear_operating_s: string | number;
  gear_starts: string | number;
  gear_thermal_derating: string | number;
  gear_thermal_shutdown: string | number;
  supply_undervoltage: string | number;
  supply_overvoltage: string | number;
  source_on_s: string | number;
  source_starts: string | number;
  source_failures: string | number;
  counter_resets: string | number;
}

/** Hourly or daily buckets of a device; the rows of several attributions in one bucket (an upgrade inside the hour) are added up. */
export async function selectRollups(
  knex: Knex,
  input: { table: 'luminaire_hourly' | 'luminaire_daily'; deviceId: string; from: Date; to: Date; limit: number },
): Promise<RollupReadRow[]> {
  const result = await knex.raw<{ rows: RollupReadRow[] }>(
    // float8 sums: numeric arithmetic (what sum() of bigint gives) costs PostgreSQL several times
    // as much, and comes back to Node as text.
    `SELECT bucket, sum(points)::int AS points, sum(energy_wh) AS energy_wh,
            max(lifetime_energy_wh) AS lifetime_energy_wh, max(lifetime_burn_s)::float8 AS lifetime_burn_s,
            sum(power_sum) / NULLIF(sum(power_n), 0) AS power_avg, max(power_max) AS power_max,
            sum(gear_temp_sum) / NULLIF(sum(gear_temp_n), 0) AS gear_temp_avg, max(gear_temp_max) AS gear_temp_max,
            sum(source_temp_sum) / NULLIF(sum(source_temp_n), 0) AS source_temp_avg, max(source_temp_max) AS source_temp_max,
            sum(output_sum) / NULLIF(sum(output_n), 0) AS output_avg,
            min(supply_voltage_min) AS supply_voltage_min, max(supply_voltage_max) AS supply_voltage_max,
            sum(gear_operating_s::float8) AS gear_operating_s, sum(gear_starts::float8) AS gear_starts,
            sum(gear_thermal_derating::float8) AS gear_thermal_derating, sum(gear_thermal_shutdown::float8) AS gear_thermal_shutdown,
            sum(supply_undervoltage::float8) AS supply_undervoltage, sum(supply_overvoltage::float8) AS supply_overvoltage,
            sum(source_on_s::float8) AS source_on_s, sum(source_starts::float8) AS source_starts,
            sum(source_failures::float8) AS source_failures, sum(counter_resets)::int AS counter_resets
       FROM ${input.table}
      WHERE device_id = ? AND bucket >= ? AND bucket < ?
      GROUP BY bucket ORDER BY bucket LIMIT ?`,
    [input.deviceId, input.from, input.to, input.limit],
  );
  return result.rows;
}

export interface StateReadRow {
  device_id: string;
  latest: Record<string, number>;
  latest_at: Date | null;
  counters: Record<string, { last: number; offset: number }>;
  counter_resets: number;
  points: string | number;
  bad_clock_count: string | number;
  last_bad_clock_at: Date | null;
  refused_fields: Record<string, { count: number; reason: string; value: string; at: string }>;
}

export async function selectStates(
  knex: Knex,
  input: { accountId: string; deviceIds: string[] },
): Promise<StateReadRow[]> {
  const result = await knex.raw<{ rows: StateReadRow[] }>(
    `SELECT device_id, latest, latest_at, counters, counter_resets, points, bad_clock_count, last_bad_clock_at, refused_fields
       FROM luminaire_state WHERE account_id = ? AND device_id = ANY(?::uuid[])`,
    [input.accountId, input.deviceIds],
  );
  return result.rows;
}

/** kWh per UTC day and group, from the fleet roll-ups (one row per account, day and attribution; per tag value for tags). */
export async function selectFleetEnergy(
  knex: Knex,
  input: { accountId: string; from: string; to: string; group: EnergyGrouping },
): Promise<Array<{ day: string; key: string | null; kwh: number }>> {
  // sum() of double precision over 1000.0 is numeric: pg answers it as a string.
  type Row = { day: string; key: string | null; kwh: string | number };
  if (input.group.by === 'tag') {
    // Readings of devices without the tag: the day's total less what the tag's values hold.
    const result = await knex.raw<{ rows: Row[] }>(
      `WITH tagged AS (
         SELECT day, tag_value AS key, sum(energy_wh) / 1000.0 AS kwh FROM luminaire_fleet_daily_tags
          WHERE account_id = ? AND tag_key = ? AND day >= ?::date AND day <= ?::date GROUP BY 1, 2),
       total AS (
         SELECT day, sum(energy_wh) / 1000.0 AS kwh FROM luminaire_fleet_daily
          WHERE account_id = ? AND day >= ?::date AND day <= ?::date GROUP BY 1)
       SELECT to_char(day, 'YYYY-MM-DD') AS day, key, kwh FROM tagged
       UNION ALL
       SELECT to_char(t.day, 'YYYY-MM-DD'), NULL, t.kwh - COALESCE((SELECT sum(kwh) FROM tagged g WHERE g.day = t.day), 0)
         FROM total t
       ORDER BY 1, 2`,
      [input.accountId, input.group.key, input.from, input.to, input.accountId, input.from, input.to],
    );
    // Rounding leaves a few µWh where every device had the tag: not a group of its own.
    return result.rows
      .map((r) => ({ day: r.day, key: r.key, kwh: Number(r.kwh) }))
      .filter((r) => r.key !== null || Math.abs(r.kwh) > 1e-9);
  }
  const key = input.group.by === 'model' ? 'a.model' : input.group.by === 'firmware' ? 'a.firmware' : 's.name';
  const result = await knex.raw<{ rows: Row[] }>(
    `SELECT to_char(f.day, 'YYYY-MM-DD') AS day, ${key} AS key, sum(f.energy_wh) / 1000.0 AS kwh
       FROM luminaire_fleet_daily f
       JOIN luminaire_attributions a ON a.id = f.attribution_id AND a.account_id = f.account_id
       ${input.group.by === 'site' ? 'LEFT JOIN sites s ON s.id = a.site_id AND s.account_id = a.account_id' : ''}
      WHERE f.account_id = ? AND f.day >= ?::date AND f.day <= ?::date
      GROUP BY 1, 2 ORDER BY 1, 2`,
    [input.accountId, input.from, input.to],
  );
  return result.rows.map((r) => ({ day: r.day, key: r.key, kwh: Number(r.kwh) }));
}
