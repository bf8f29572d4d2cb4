import type { Knex } from 'knex';
import type { CounterSegments } from '../counter-segments';
import type { FleetDailyRow, FleetGroupRow, FleetTagRow, RollupRow } from '../rollup-buckets';
import type { LuminaireValues } from '#protocol/luminaire-fields';
import { arrayLiteral } from '../../db/array-literal';

/**
 * The writes of one luminaire batch, all in the batch's transaction. Each statement takes the
 * batch's rows as one array per column, spread by unnest (core/db/array-literal.ts): one round trip per table
 * whatever the batch size, and the same SQL on PostgreSQL and PGlite.
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
      [arrayLiteral(input.create)],
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
    [arrayLiteral(deviceIds)],
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
  deviceId: string;
  /** ISO 8601 (the key the RETURNING rows are matched by). */
  at: string;
  badClock: boolean;
  values: LuminaireValues;
  lifetimeEnergyWh: number | null;
}

/** The value columns of a reading, with their array types, in the order of the INSERT. */
const POINT_VALUES = [
  ['energy_wh', 'float8'],
  ['power_w', 'real'],
  ['gear_operating_s', 'bigint'],
  ['gear_starts', 'bigint'],
  ['gear_temp_c', 'real'],
  ['gear_thermal_derating', 'bigint'],
  ['gear_thermal_shutdown', 'bigint'],
  ['supply_voltage_v', 'real'],
  ['supply_undervoltage', 'bigint'],
  ['supply_overvoltage', 'bigint'],
  ['source_on_s', 'bigint'],
  ['source_starts', 'bigint'],
  ['source_temp_c', 'real'],
  ['source_failures', 'bigint'],
  ['output_level_pct', 'real'],
  ['rated_life_h', 'integer'],
] as const satisfies ReadonlyArray<readonly [keyof LuminaireValues, string]>;

const INSERT_POINTS = `INSERT INTO luminaire_points (device_id, at, bad_clock, lifetime_energy_wh, ${POINT_VALUES.map(([c]) => c).join(', ')})
  SELECT * FROM unnest(?::uuid[], ?::timestamptz[], ?::boolean[], ?::float8[], ${POINT_VALUES.map(([, t]) => `?::${t}[]`).join(', ')})
  ON CONFLICT (device_id, at, bad_clock) DO NOTHING
  RETURNING device_id, at, bad_clock`;

/** Inserts the readings; answers the keys of those stored (a redelivered reading is there already). */
export async function insertPoints(trx: Knex.Transaction, rows: PointRow[]): Promise<Set<string>> {
  const result = await trx.raw<{ rows: Array<{ device_id: string; at: Date; bad_clock: boolean }> }>(INSERT_POINTS, [
    arrayLiteral(rows.map((r) => r.deviceId)),
    arrayLiteral(rows.map((r) => r.at)),
    arrayLiteral(rows.map((r) => r.badClock)),
    arrayLiteral(rows.map((r) => r.lifetimeEnergyWh)),
    ...POINT_VALUES.map(([c]) => arrayLiteral(rows.map((r) => r.values[c]))),
  ]);
  return new Set(result.rows.map((r) => `${r.device_id}|${new Date(r.at).toISOString()}|${r.bad_clock}`));
}

/** Roll-up columns: how a batch's row adds to a stored one, and the array type it is sent as. */
const ROLLUP_COLUMNS = [
  ['device_id', 'key', 'uuid'],
  ['bucket', 'key', 'timestamptz'],
  ['attribution_id', 'key', 'bigint'],
  ['account_id', 'key', 'uuid'],
  ['points', 'sum', 'integer'],
  ['energy_wh', 'sum', 'float8'],
  ['power_sum', 'sum', 'float8'],
  ['power_n', 'sum', 'integer'],
  ['gear_temp_sum', 'sum', 'float8'],
  ['gear_temp_n', 'sum', 'integer'],
  ['source_temp_sum', 'sum', 'float8'],
  ['source_temp_n', 'sum', 'integer'],
  ['output_sum', 'sum', 'float8'],
  ['output_n', 'sum', 'integer'],
  ['counter_resets', 'sum', 'integer'],
  ['gear_operating_s', 'sum', 'bigint'],
  ['gear_starts', 'sum', 'bigint'],
  ['gear_thermal_derating', 'sum', 'bigint'],
  ['gear_thermal_shutdown', 'sum', 'bigint'],
  ['supply_undervoltage', 'sum', 'bigint'],
  ['supply_overvoltage', 'sum', 'bigint'],
  ['source_on_s', 'sum', 'bigint'],
  ['source_starts', 'sum', 'bigint'],
  ['source_failures', 'sum', 'bigint'],
  ['lifetime_energy_wh', 'max', 'float8'],
  ['lifetime_burn_s', 'max', 'bigint'],
  ['power_max', 'max', 'real'],
  ['gear_temp_max', 'max', 'real'],
  ['source_temp_max', 'max', 'real'],
  ['supply_voltage_max', 'max', 'real'],
  ['supply_voltage_min', 'min', 'real'],
] as const satisfies ReadonlyArray<readonly [keyof RollupRow, 'key' | 'sum' | 'max' | 'min', string]>;

const rollupSql = (table: 'luminaire_hourly' | 'luminaire_daily') =>
  `INSERT INTO ${table} AS r (${ROLLUP_COLUMNS.map(([c]) => c).join(', ')})
  SELECT * FROM unnest(${ROLLUP_COLUMNS.map(([, , t]) => `?::${t}[]`).join(', ')})
  ON CONFLICT (device_id, bucket, attribution_id) DO UPDATE SET ${ROLLUP_COLUMNS.filter(([, how]) => how !== 'key')
    .map(([c, how]) =>
      how === 'sum'
        ? `${c} = r.${c} + EXCLUDED.${c}`
        : `${c} = ${how === 'max' ? 'GREATEST' : 'LEAST'}(r.${c}, EXCLUDED.${c})`,
    )
    .join(', ')}`;

const FLEET_DAILY_SQL = `INSERT INTO luminaire_fleet_daily AS f (account_id, day, attribution_id, energy_wh, points)
  SELECT * FROM unnest(?::uuid[], ?::date[], ?::bigint[], ?::float8[], ?::integer[])
  ON CONFLICT (account_id, day, attribution_id)
  DO UPDATE SET energy_wh = f.energy_wh + EXCLUDED.energy_wh, points = f.points + EXCLUDED.points`;
const FLEET_TAGS_SQL = `INSERT INTO luminaire_fleet_daily_tags AS f (account_id, tag_key, day, tag_value, energy_wh, points)
  SELECT * FROM unnest(?::uuid[], ?::text[], ?::date[], ?::text[], ?::float8[], ?::integer[])
  ON CONFLICT (account_id, tag_key, day, tag_value)
  DO UPDATE SET energy_wh = f.energy_wh + EXCLUDED.energy_wh, points = f.points + EXCLUDED.points`;
const FLEET_GROUPS_SQL = `INSERT INTO luminaire_fleet_daily_groups AS f (account_id, dimension, day, key, energy_wh, points)
  SELECT * FROM unnest(?::uuid[], ?::text[], ?::date[], ?::text[], ?::float8[], ?::integer[])
  ON CONFLICT (account_id, dimension, day, key)
  DO UPDATE SET energy_wh = f.energy_wh + EXCLUDED.energy_wh, points = f.points + EXCLUDED.points`;

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

const STATES_SQL = `UPDATE luminaire_state s SET latest = x.latest, latest_at = x.latest_at, counters = x.counters,
         counter_resets = x.counter_resets, points = x.points, bad_clock_count = x.bad_clock_count,
         last_bad_clock_at = x.last_bad_clock_at, refused_fields = x.refused_fields
    FROM unnest(?::uuid[], ?::jsonb[], ?::timestamptz[], ?::jsonb[], ?::integer[], ?::bigint[], ?::bigint[],
                ?::timestamptz[], ?::jsonb[])
      AS x(device_id, latest, latest_at, counters, counter_resets, points, bad_clock_count, last_bad_clock_at, refused_fields)
   WHERE s.device_id = x.device_id`;

/** What a batch writes once its readings are in: roll-ups, fleet roll-ups, and the states as it left them. */
export interface BatchWrites {
  hourly: RollupRow[];
  daily: RollupRow[];
  fleetDaily: FleetDailyRow[];
  fleetTags: FleetTagRow[];
  fleetGroups: FleetGroupRow[];
  states: StateRow[];
}

/**
 * Every write of a batch after its readings, in one statement of data-modifying CTEs (each on a
 * table of its own): one round trip, parse and plan instead of six, which the per-statement
 * profile of the ingest showed costing both Node and PostgreSQL as much as the rows themselves.
 * Roll-ups add to what is stored (sums added, extremes kept, ON CONFLICT); energy goes to the
 * per-attribution, per-tag and per-dimension fleet roll-ups.
 */
export async function writeBatch(trx: Knex.Transaction, input: BatchWrites): Promise<void> {
  const parts: Array<{ sql: string; bindings: string[] }> = [];
  const rollups = (table: 'luminaire_hourly' | 'luminaire_daily', rows: RollupRow[]) => {
    if (rows.length)
      parts.push({ sql: rollupSql(table), bindings: ROLLUP_COLUMNS.map(([c]) => arrayLiteral(rows.map((r) => r[c]))) });
  };
  rollups('luminaire_hourly', input.hourly);
  rollups('luminaire_daily', input.daily);
  const { fleetDaily: daily, fleetTags: tags, fleetGroups: groups, states } = input;
  if (daily.length)
    parts.push({
      sql: FLEET_DAILY_SQL,
      bindings: [
        arrayLiteral(daily.map((r) => r.account_id)),
        arrayLiteral(daily.map((r) => r.day)),
        arrayLiteral(daily.map((r) => r.attribution_id)),
        arrayLiteral(daily.map((r) => r.energy_wh)),
        arrayLiteral(daily.map((r) => r.points)),
      ],
    });
  if (tags.length)
    parts.push({
      sql: FLEET_TAGS_SQL,
      bindings: [
        arrayLiteral(tags.map((r) => r.account_id)),
        arrayLiteral(tags.map((r) => r.tag_key)),
        arrayLiteral(tags.map((r) => r.day)),
        arrayLiteral(tags.map((r) => r.tag_value)),
        arrayLiteral(tags.map((r) => r.energy_wh)),
        arrayLiteral(tags.map((r) => r.points)),
      ],
    });
  if (groups.length)
    parts.push({
      sql: FLEET_GROUPS_SQL,
      bindings: [
        arrayLiteral(groups.map((r) => r.account_id)),
        arrayLiteral(groups.map((r) => r.dimension)),
        arrayLiteral(groups.map((r) => r.day)),
        arrayLiteral(groups.map((r) => r.key)),
        arrayLiteral(groups.map((r) => r.energy_wh)),
        arrayLiteral(groups.map((r) => r.points)),
      ],
    });
  if (states.length) {
    const json = (pick: (r: StateRow) => unknown) => arrayLiteral(states.map((r) => JSON.stringify(pick(r))));
    parts.push({
      sql: STATES_SQL,
      bindings: [
        arrayLiteral(states.map((r) => r.device_id)),
        json((r) => r.latest),
        arrayLiteral(states.map((r) => r.latest_at)),
        json((r) => r.counters),
        arrayLiteral(states.map((r) => r.counter_resets)),
        arrayLiteral(states.map((r) => r.points)),
        arrayLiteral(states.map((r) => r.bad_clock_count)),
        arrayLiteral(states.map((r) => r.last_bad_clock_at)),
        json((r) => r.refused_fields),
      ],
    });
  }
  if (parts.length === 0) return;
  // Data-modifying CTEs run to completion whether or not the final SELECT reads them.
  await trx.raw(
    `WITH ${parts.map((p, i) => `w${i} AS (${p.sql})`).join(',\n')}\nSELECT 1`,
    parts.flatMap((p) => p.bindings),
  );
}
