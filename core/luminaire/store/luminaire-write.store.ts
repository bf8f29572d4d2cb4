import type { Knex } from 'knex';
import type { CounterSegments } from '../counter-segments';
import type { FleetDailyRow, FleetTagRow, RollupRow } from '../rollup-buckets';
import { LUMINAIRE_COUNTERS } from '#protocol/luminaire-fields';

/**
 * The writes of one luminaire batch, all in the batch's transaction. Rows go in as one JSON
 * document per statement (jsonb_to_recordset): one round trip per table whatever the batch size,
 * and the same SQL on PostgreSQL and PGlite.
 */

/** A device's luminaire state and what the device is now (the attribution of its readings). */
export interface LockedState {
  device_id: string;
  account_id: string;
  latest: Record<string, number>;
  latest_at: Date | null;
  counters: CounterSegments;
  counter_resets: number;
  points: string | number;
  bad_clock_count: string | number;
  last_bad_clock_at: Date | null;
  refused_fields: Record<string, unknown>;
  model: string;
  firmware: string | null;
  site_id: string | null;
  tags: Record<string, string>;
}

/** Creates the state rows of `create` (those not known to exist), then locks the batch's rows (in id order: no deadlock between processes). */
export async function lockStates(
  trx: Knex.Transaction,
  input: { deviceIds: string[]; create: string[] },
): Promise<LockedState[]> {
  const { deviceIds } = input;
  if (input.create.length)
    await trx.raw(
      `INSERT INTO luminaire_state (device_id, account_id)
       SELECT d.id, d.account_id FROM devices d WHERE d.id = ANY(?::uuid[])
       ON CONFLICT (device_id) DO NOTHING`,
      [input.create],
    );
  const result = await trx.raw<{ rows: LockedState[] }>(
    `SELECT s.device_id, d.account_id, s.latest, s.latest_at, s.counters, s.counter_resets, s.points,
            s.bad_clock_count, s.last_bad_clock_at, s.refused_fields,
            m.name AS model, d.firmware, d.site_id, d.tags
       FROM luminaire_state s
       JOIN devices d ON d.id = s.device_id
       JOIN models m ON m.id = d.model_id
      WHERE s.device_id = ANY(?::uuid[])
      ORDER BY s.device_id
        FOR UPDATE OF s`,
    [deviceIds],
  );
  return result.rows;
}

export interface AttributionInput {
  account_id: string;
  model: string;
  firmware: string | null;
  site_id: string | null;
  fingerprint: string;
}

/** Ids of these attributions, created when new. */
export async function attributionIds(
  trx: Knex.Transaction,
  items: AttributionInput[],
): Promise<Array<{ id: string | number; account_id: string; fingerprint: string }>> {
  const result = await trx.raw<{ rows: Array<{ id: string | number; account_id: string; fingerprint: string }> }>(
    `INSERT INTO luminaire_attributions (account_id, model, firmware, site_id, fingerprint)
     SELECT x.account_id, x.model, x.firmware, x.site_id, x.fingerprint
       FROM jsonb_to_recordset(?::jsonb)
         AS x(account_id uuid, model text, firmware text, site_id uuid, fingerprint text)
     -- DO UPDATE (of nothing that changes) so existing rows come back with their id too.
     ON CONFLICT (account_id, fingerprint) DO UPDATE SET fingerprint = EXCLUDED.fingerprint
     RETURNING id, account_id, fingerprint`,
    [JSON.stringify(items)],
  );
  return result.rows;
}

export interface PointRow {
  device_id: string;
  at: string;
  bad_clock: boolean;
  lifetime_energy_wh: number | null;
  [field: string]: unknown;
}

const POINT_COLUMNS = `device_id uuid, at timestamptz, bad_clock boolean, energy_wh double precision,
  lifetime_energy_wh double precision, power_w real, gear_operating_s bigint, gear_starts bigint, gear_temp_c real,
  gear_thermal_derating bigint, gear_thermal_shutdown bigint, supply_voltage_v real, supply_undervoltage bigint,
  supply_overvoltage bigint, source_on_s bigint, source_starts bigint, source_temp_c real, source_failures bigint,
  output_level_pct real, rated_life_h integer`;
const POINT_NAMES = POINT_COLUMNS.split(',').map((c) => c.trim().split(/\s+/)[0]!);

/** Inserts the readings; answers the keys of those stored (a redelivered reading is there already). */
export async function insertPoints(trx: Knex.Transaction, rows: PointRow[]): Promise<Set<string>> {
  const result = await trx.raw<{ rows: Array<{ device_id: string; at: Date; bad_clock: boolean }> }>(
    `INSERT INTO luminaire_points (${POINT_NAMES.join(', ')})
     SELECT ${POINT_NAMES.map((n) => `x.${n}`).join(', ')} FROM jsonb_to_recordset(?::jsonb) AS x(${POINT_COLUMNS})
     ON CONFLICT (device_id, at, bad_clock) DO NOTHING
     RETURNING device_id, at, bad_clock`,
    [JSON.stringify(rows)],
  );
  return new Set(result.rows.map((r) => `${r.device_id}|${new Date(r.at).toISOString()}|${r.bad_clock}`));
}

const ROLLUP_SUMS = [
  'points',
  'energy_wh',
  'power_sum',
  'power_n',
  'gear_temp_sum',
  'gear_temp_n',
  'source_temp_sum',
  'source_temp_n',
  'output_sum',
  'output_n',
  'counter_resets',
  ...LUMINAIRE_COUNTERS.filter((c) => c !== 'energy_wh'),
];
const ROLLUP_MAX = [
  'lifetime_energy_wh',
  'lifetime_burn_s',
  'power_max',
  'gear_temp_max',
  'source_temp_max',
  'supply_voltage_max',
];
const ROLLUP_MIN = ['supply_voltage_min'];
const ROLLUP_TYPES: Record<string, string> = {
  device_id: 'uuid',
  bucket: 'timestamptz',
  attribution_id: 'bigint',
  account_id: 'uuid',
  points: 'integer',
  power_n: 'integer',
  gear_temp_n: 'integer',
  source_temp_n: 'integer',
  output_n: 'integer',
  counter_resets: 'integer',
  lifetime_burn_s: 'bigint',
  ...Object.fromEntries(LUMINAIRE_COUNTERS.filter((c) => c !== 'energy_wh').map((c) => [c, 'bigint'])),
};
const ROLLUP_NAMES = [
  'device_id',
  'bucket',
  'attribution_id',
  'account_id',
  ...ROLLUP_SUMS,
  ...ROLLUP_MAX,
  ...ROLLUP_MIN,
];
const ROLLUP_RECORD = ROLLUP_NAMES.map((n) => `${n} ${ROLLUP_TYPES[n] ?? 'double precision'}`).join(', ');

/** Adds a batch's roll-up rows to `luminaire_hourly` or `luminaire_daily`. */
export async function upsertRollups(
  trx: Knex.Transaction,
  table: 'luminaire_hourly' | 'luminaire_daily',
  rows: RollupRow[],
): Promise<void> {
  if (rows.length === 0) return;
  const set = [
    ...ROLLUP_SUMS.map((c) => `${c} = r.${c} + EXCLUDED.${c}`),
    ...ROLLUP_MAX.map((c) => `${c} = GREATEST(r.${c}, EXCLUDED.${c})`),
    ...ROLLUP_MIN.map((c) => `${c} = LEAST(r.${c}, EXCLUDED.${c})`),
  ];
  await trx.raw(
    `INSERT INTO ${table} AS r (${ROLLUP_NAMES.join(', ')})
     SELECT ${ROLLUP_NAMES.map((n) => `x.${n}`).join(', ')} FROM jsonb_to_recordset(?::jsonb) AS x(${ROLLUP_RECORD})
     ON CONFLICT (device_id, bucket, attribution_id) DO UPDATE SET ${set.join(', ')}`,
    [JSON.stringify(rows)],
  );
}

export async function upsertFleetDaily(trx: Knex.Transaction, rows: FleetDailyRow[]): Promise<void> {
  if (rows.length === 0) return;
  await trx.raw(
    `INSERT INTO luminaire_fleet_daily AS f (account_id, day, attribution_id, energy_wh, points)
     SELECT x.account_id, x.day, x.attribution_id, x.energy_wh, x.points
       FROM jsonb_to_recordset(?::jsonb) AS x(account_id uuid, day date, attribution_id bigint, energy_wh double precision, points integer)
     ON CONFLICT (account_id, day, attribution_id)
     DO UPDATE SET energy_wh = f.energy_wh + EXCLUDED.energy_wh, points = f.points + EXCLUDED.points`,
    [JSON.stringify(rows)],
  );
}

export async function upsertFleetTags(trx: Knex.Transaction, rows: FleetTagRow[]): Promise<void> {
  if (rows.length === 0) return;
  await trx.raw(
    `INSERT INTO luminaire_fleet_daily_tags AS f (account_id, tag_key, day, tag_value, energy_wh, points)
     SELECT x.account_id, x.tag_key, x.day, x.tag_value, x.energy_wh, x.points
       FROM jsonb_to_recordset(?::jsonb)
         AS x(account_id uuid, tag_key text, day date, tag_value text, energy_wh double precision, points integer)
     ON CONFLICT (account_id, tag_key, day, tag_value)
     DO UPDATE SET energy_wh = f.energy_wh + EXCLUDED.energy_wh, points = f.points + EXCLUDED.points`,
    [JSON.stringify(rows)],
  );
}

export interface StateRow {
  device_id: string;
  latest: Record<string, number>;
  latest_at: string | null;
  counters: CounterSegments;
  counter_resets: number;
  points: number;
  bad_clock_count: number;
  last_bad_clock_at: string | null;
  refused_fields: Record<string, unknown>;
}

/** The states as the batch left them (computed from the locked rows). */
export async function writeStates(trx: Knex.Transaction, rows: StateRow[]): Promise<void> {
  await trx.raw(
    `UPDATE luminaire_state s SET latest = x.latest, latest_at = x.latest_at, counters = x.counters,
            counter_resets = x.counter_resets, points = x.points, bad_clock_count = x.bad_clock_count,
            last_bad_clock_at = x.last_bad_clock_at, refused_fields = x.refused_fields
       FROM jsonb_to_recordset(?::jsonb) AS x(device_id uuid, latest jsonb, latest_at timestamptz, counters jsonb,
            counter_resets integer, points bigint, bad_clock_count bigint, last_bad_clock_at timestamptz, refused_fields jsonb)
      WHERE s.device_id = x.device_id`,
    [JSON.stringify(rows)],
  );
}
