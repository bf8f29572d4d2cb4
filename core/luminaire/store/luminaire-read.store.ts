import type { Knex } from 'knex';
import type { EnergyGrouping, LuminaireBucket } from '../luminaire-types';

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

/** The stored columns of a roll-up row, in the order `selectBuckets` reads them. */
const BUCKET_COLUMNS = [
  'points',
  'energy_wh',
  'lifetime_energy_wh',
  'lifetime_burn_s',
  'power_sum',
  'power_n',
  'power_max',
  'gear_temp_sum',
  'gear_temp_n',
  'gear_temp_max',
  'source_temp_sum',
  'source_temp_n',
  'source_temp_max',
  'output_sum',
  'output_n',
  'supply_voltage_min',
  'supply_voltage_max',
  'gear_operating_s',
  'gear_starts',
  'gear_thermal_derating',
  'gear_thermal_shutdown',
  'supply_undervoltage',
  'supply_overvoltage',
  'source_on_s',
  'source_starts',
  'source_failures',
  'counter_resets',
] as const;

/**
 * Hourly or daily buckets of a device, oldest first. A year of hours is 8,760 rows: the profile
 * of that query (bench/luminaire-ingest.bench.ts --profile) spent most of its time in the driver
 * decoding 25 fields per row and in PostgreSQL's 24 aggregates per bucket. So the rows come
 * as stored, without GROUP BY, as one text (each row's record text, `(v1,v2,,v4)`, a NULL
 * empty; every column is a number): one field to decode, split here. The rows of several
 * attributions in one bucket (an upgrade inside the hour) are added up here, averages from their
 * sums and counts, as the SQL aggregates did.
 */
export async function selectBuckets(
  knex: Knex,
  input: { table: 'luminaire_hourly' | 'luminaire_daily'; deviceId: string; from: Date; to: Date; limit: number },
): Promise<LuminaireBucket[]> {
  const result = await knex.raw<{ rows: Array<{ rows: string | null }> }>(
    `SELECT string_agg(r::text, '') AS rows
       FROM (SELECT date_part('epoch', bucket) * 1000 AS t, ${BUCKET_COLUMNS.join(', ')}
               FROM ${input.table}
              WHERE device_id = ? AND bucket >= ? AND bucket < ?
              ORDER BY bucket LIMIT ?) r`,
    [input.deviceId, input.from, input.to, input.limit],
  );
  const text = result.rows[0]?.rows;
  if (!text) return [];
  const buckets: LuminaireBucket[] = [];
  // Sums and counts of the bucket last read (power, gear temperature, source temperature, output):
  // another row of the same bucket (another attribution) adds to them.
  const sums = [0, 0, 0, 0, 0, 0, 0, 0];
  let lastT = NaN;
  for (const f of inBucketOrder(text.slice(1, -1).split(')('))) {
    const t = Number(f[0]);
    const b: LuminaireBucket = {
      at: '',
      points: zero(f[1]),
      energyWh: zero(f[2]),
      lifetimeEnergyWh: num(f[3]),
      burnHours: hours(f[4]),
      powerAvgW: null,
      powerMaxW: num(f[7]),
      gearTempAvgC: null,
      gearTempMaxC: num(f[10]),
      sourceTempAvgC: null,
      sourceTempMaxC: num(f[13]),
      outputLevelAvgPct: null,
      supplyVoltageMinV: num(f[16]),
      supplyVoltageMaxV: num(f[17]),
      gearOperatingS: zero(f[18]),
      gearStarts: zero(f[19]),
      gearThermalDerating: zero(f[20]),
      gearThermalShutdown: zero(f[21]),
      supplyUndervoltage: zero(f[22]),
      supplyOvervoltage: zero(f[23]),
      sourceOnS: zero(f[24]),
      sourceStarts: zero(f[25]),
      sourceFailures: zero(f[26]),
      counterResets: zero(f[27]),
    };
    const prev = buckets[buckets.length - 1];
    const same = prev !== undefined && t === lastT;
    const target = same ? prev : b;
    for (let i = 0; i < 8; i++) sums[i] = (same ? sums[i]! : 0) + zero(f[SUM_FIELDS[i]!]);
    if (same) addBucket(prev, b);
    else {
      b.at = new Date(t).toISOString();
      buckets.push(b);
    }
    lastT = t;
    target.powerAvgW = avg(sums[0]!, sums[1]!);
    target.gearTempAvgC = avg(sums[2]!, sums[3]!);
    target.sourceTempAvgC = avg(sums[4]!, sums[5]!);
    target.outputLevelAvgPct = avg(sums[6]!, sums[7]!);
  }
  return buckets;
}

/** Positions in a record of power_sum, power_n, gear_temp_sum, gear_temp_n, source_temp_sum, source_temp_n, output_sum, output_n. */
const SUM_FIELDS = [5, 6, 8, 9, 11, 12, 14, 15];
const num = (v: string | undefined): number | null => (v === '' || v === undefined ? null : Number(v));
const zero = (v: string | undefined): number => (v === '' || v === undefined ? 0 : Number(v));
const hours = (v: string | undefined): number | null => (v === '' || v === undefined ? null : Number(v) / 3600);

/**
 * The records' fields, oldest first: string_agg keeps the order of the sorted subquery that feeds
 * it (what PostgreSQL does), and a cheap check sorts them should it ever not.
 */
function inBucketOrder(records: string[]): string[][] {
  const fields = records.map((r) => r.split(','));
  for (let i = 1; i < fields.length; i++)
    if (Number(fields[i]![0]) < Number(fields[i - 1]![0])) return fields.sort((a, b) => Number(a[0]) - Number(b[0]));
  return fields;
}

const avg = (sum: number, n: number): number | null => (n === 0 ? null : sum / n);
const maxOf = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.max(a, b));
const minOf = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.min(a, b));

/** Another attribution's row of the same bucket added to it (the averages are set from the sums after). */
function addBucket(b: LuminaireBucket, row: LuminaireBucket): void {
  b.points += row.points;
  b.energyWh += row.energyWh;
  b.lifetimeEnergyWh = maxOf(b.lifetimeEnergyWh, row.lifetimeEnergyWh);
  b.burnHours = maxOf(b.burnHours, row.burnHours);
  b.powerMaxW = maxOf(b.powerMaxW, row.powerMaxW);
  b.gearTempMaxC = maxOf(b.gearTempMaxC, row.gearTempMaxC);
  b.sourceTempMaxC = maxOf(b.sourceTempMaxC, row.sourceTempMaxC);
  b.supplyVoltageMinV = minOf(b.supplyVoltageMinV, row.supplyVoltageMinV);
  b.supplyVoltageMaxV = maxOf(b.supplyVoltageMaxV, row.supplyVoltageMaxV);
  b.gearOperatingS += row.gearOperatingS;
  b.gearStarts += row.gearStarts;
  b.gearThermalDerating += row.gearThermalDerating;
  b.gearThermalShutdown += row.gearThermalShutdown;
  b.supplyUndervoltage += row.supplyUndervoltage;
  b.supplyOvervoltage += row.supplyOvervoltage;
  b.sourceOnS += row.sourceOnS;
  b.sourceStarts += row.sourceStarts;
  b.sourceFailures += row.sourceFailures;
  b.counterResets += row.counterResets;
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

/**
 * kWh per UTC day and group, from the fleet roll-ups per dimension (model, firmware, site) or per
 * tag value: a few rows per day whatever the number of fixtures (the per-attribution roll-up
 * this read before had one row per attribution and day: 108,000 rows joined and grouped for
 * 100,000 fixtures over 90 days).
 */
export async function selectFleetEnergy(
  knex: Knex,
  input: { accountId: string; from: string; to: string; group: EnergyGrouping },
): Promise<Array<{ day: string; key: string | null; kwh: number }>> {
  // Days come as days since 1970-01-01 and are formatted here: to_char per row cost PostgreSQL
  // more than the rest of the query, and a date's text depends on the session's DateStyle.
  // kWh: sum() of double precision over an integer is double precision, a number from the driver.
  type Row = { day: number; key: string | null; kwh: number };
  const dayOf = (n: number) => new Date(n * 86_400_000).toISOString().slice(0, 10);
  if (input.group.by === 'tag') {
    // Readings of devices without the tag: the day's total (every reading has a model) less what
    // the tag's values hold.
    const result = await knex.raw<{ rows: Row[] }>(
      `WITH tagged AS (
         SELECT day, tag_value AS key, sum(energy_wh) / 1000 AS kwh FROM luminaire_fleet_daily_tags
          WHERE account_id = ? AND tag_key = ? AND day >= ?::date AND day <= ?::date GROUP BY 1, 2),
       tagged_day AS (SELECT day, sum(kwh) AS kwh FROM tagged GROUP BY 1),
       total AS (
         SELECT day, sum(energy_wh) / 1000 AS kwh FROM luminaire_fleet_daily_groups
          WHERE account_id = ? AND dimension = 'model' AND day >= ?::date AND day <= ?::date GROUP BY 1)
       SELECT day - DATE '1970-01-01' AS day, key, kwh FROM tagged
       UNION ALL
       SELECT t.day - DATE '1970-01-01', NULL, t.kwh - COALESCE(d.kwh, 0)
         FROM total t LEFT JOIN tagged_day d ON d.day = t.day
       ORDER BY 1, 2`,
      [input.accountId, input.group.key, input.from, input.to, input.accountId, input.from, input.to],
    );
    // Rounding leaves a few µWh where every device had the tag: not a group of its own.
    return result.rows
      .map((r) => ({ day: dayOf(r.day), key: r.key, kwh: r.kwh }))
      .filter((r) => r.key !== null || Math.abs(r.kwh) > 1e-9);
  }
  // Several rows of one day and key (sites deleted since: no name) are added up by the caller;
  // the order makes ties in the caller's largest-first order stable.
  const result = await knex.raw<{ rows: Row[] }>(
    `SELECT f.day - DATE '1970-01-01' AS day, ${input.group.by === 'site' ? 's.name' : "NULLIF(f.key, '')"} AS key,
            f.energy_wh / 1000 AS kwh
       FROM luminaire_fleet_daily_groups f
       ${input.group.by === 'site' ? "LEFT JOIN sites s ON s.id = NULLIF(f.key, '')::uuid AND s.account_id = f.account_id" : ''}
      WHERE f.account_id = ? AND f.dimension = ? AND f.day >= ?::date AND f.day <= ?::date
      ORDER BY 1, 2`,
    [input.accountId, input.group.by, input.from, input.to],
  );
  return result.rows.map((r) => ({ day: dayOf(r.day), key: r.key, kwh: r.kwh }));
}
