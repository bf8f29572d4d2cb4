import type { LuminaireCounter, LuminaireValues } from '#protocol/luminaire-fields';
import type { CounterContribution } from './counter-segments';

/**
 * One roll-up row: what the readings of one device in one bucket (hour or UTC day) added, for
 * one attribution (what the device was then). Averages are kept as sum and count so a batch adds
 * to a row with one upsert; the lifetime figures are the largest seen (they only grow).
 */
export interface RollupRow extends Record<LuminaireCounter, number> {
  device_id: string;
  bucket: string;
  attribution_id: number;
  account_id: string;
  points: number;
  lifetime_energy_wh: number | null;
  lifetime_burn_s: number | null;
  power_sum: number;
  power_n: number;
  power_max: number | null;
  gear_temp_sum: number;
  gear_temp_n: number;
  gear_temp_max: number | null;
  source_temp_sum: number;
  source_temp_n: number;
  source_temp_max: number | null;
  output_sum: number;
  output_n: number;
  supply_voltage_min: number | null;
  supply_voltage_max: number | null;
  counter_resets: number;
}

export interface FleetDailyRow {
  account_id: string;
  day: string;
  attribution_id: number;
  energy_wh: number;
  points: number;
}

/** What fleet energy groups by without a tag: `model`, `firmware` or `site` (its id), '' for none. */
export type FleetDimension = 'model' | 'firmware' | 'site';

export interface FleetGroupRow {
  account_id: string;
  dimension: FleetDimension;
  day: string;
  key: string;
  energy_wh: number;
  points: number;
}

export interface FleetTagRow {
  account_id: string;
  tag_key: string;
  day: string;
  tag_value: string;
  energy_wh: number;
  points: number;
}

export const hourOf = (at: Date): Date => new Date(Math.floor(at.getTime() / 3_600_000) * 3_600_000);
export const dayOf = (at: Date): Date => new Date(Math.floor(at.getTime() / 86_400_000) * 86_400_000);

const max = (a: number | null, b: number | undefined): number | null =>
  b === undefined ? a : a === null ? b : Math.max(a, b);
const min = (a: number | null, b: number | undefined): number | null =>
  b === undefined ? a : a === null ? b : Math.min(a, b);

export interface RollupInput {
  deviceId: string;
  accountId: string;
  attributionId: number;
  at: Date;
  values: LuminaireValues;
  counters: CounterContribution;
}

/** Roll-up rows of one batch, for one bucket size. */
export class RollupBuckets {
  private readonly rows = new Map<string, RollupRow>();

  constructor(private readonly bucketOf: (at: Date) => Date) {}

  add(input: RollupInput): void {
    const bucket = this.bucketOf(input.at).toISOString();
    const key = `${input.deviceId}|${bucket}|${input.attributionId}`;
    let row = this.rows.get(key);
    if (!row) {
      row = emptyRow({ ...input, bucket });
      this.rows.set(key, row);
    }
    const v = input.values;
    const d = input.counters.deltas;
    row.points += 1;
    row.energy_wh += d.energy_wh;
    row.gear_operating_s += d.gear_operating_s;
    row.gear_starts += d.gear_starts;
    row.gear_thermal_derating += d.gear_thermal_derating;
    row.gear_thermal_shutdown += d.gear_thermal_shutdown;
    row.supply_undervoltage += d.supply_undervoltage;
    row.supply_overvoltage += d.supply_overvoltage;
    row.source_on_s += d.source_on_s;
    row.source_starts += d.source_starts;
    row.source_failures += d.source_failures;
    if (input.counters.reset) row.counter_resets += 1;
    row.lifetime_energy_wh = max(row.lifetime_energy_wh, input.counters.lifetimeEnergyWh ?? undefined);
    row.lifetime_burn_s = max(row.lifetime_burn_s, input.counters.lifetimeBurnS ?? undefined);
    if (v.power_w !== undefined) {
      row.power_sum += v.power_w;
      row.power_n += 1;
      row.power_max = max(row.power_max, v.power_w);
    }
    if (v.gear_temp_c !== undefined) {
      row.gear_temp_sum += v.gear_temp_c;
      row.gear_temp_n += 1;
      row.gear_temp_max = max(row.gear_temp_max, v.gear_temp_c);
    }
    if (v.source_temp_c !== undefined) {
      row.source_temp_sum += v.source_temp_c;
      row.source_temp_n += 1;
      row.source_temp_max = max(row.source_temp_max, v.source_temp_c);
    }
    if (v.output_level_pct !== undefined) {
      row.output_sum += v.output_level_pct;
      row.output_n += 1;
    }
    row.supply_voltage_min = min(row.supply_voltage_min, v.supply_voltage_v);
    row.supply_voltage_max = max(row.supply_voltage_max, v.supply_voltage_v);
  }

  list(): RollupRow[] {
    return [...this.rows.values()];
  }

  /** Energy per account, UTC day and attribution: what fleet energy reads. */
  fleetDaily(): FleetDailyRow[] {
    const fleet = new Map<string, FleetDailyRow>();
    for (const row of this.rows.values()) {
      const day = row.bucket.slice(0, 10);
      const key = `${row.account_id}|${day}|${row.attribution_id}`;
      const f = fleet.get(key) ?? {
        account_id: row.account_id,
        day,
        attribution_id: row.attribution_id,
        energy_wh: 0,
        points: 0,
      };
      f.energy_wh += row.energy_wh;
      f.points += row.points;
      fleet.set(key, f);
    }
    return [...fleet.values()];
  }

  /** Energy per account, tag, UTC day and tag value: each row counts under every tag of its device then. */
  fleetTags(tagsOf: (deviceId: string) => Record<string, string>): FleetTagRow[] {
    return this.sumBy((row) => Object.entries(tagsOf(row.device_id))).map(
      ([account_id, tag_key, day, tag_value, f]) => ({
        account_id,
        tag_key,
        day,
        tag_value,
        energy_wh: f.energy_wh,
        points: f.points,
      }),
    );
  }

  /**
   * Energy per account, dimension (model, firmware, site), UTC day and value: fleet energy by one
   * of them reads a few rows per day instead of one per attribution (bench/luminaire-ingest.bench.ts).
   */
  fleetGroups(groupsOf: (deviceId: string) => Record<FleetDimension, string>): FleetGroupRow[] {
    return this.sumBy((row) => Object.entries(groupsOf(row.device_id))).map(([account_id, dimension, day, key, f]) => ({
      account_id,
      dimension: dimension as FleetDimension,
      day,
      key,
      energy_wh: f.energy_wh,
      points: f.points,
    }));
  }

  /** Energy and points of the rows per account, UTC day and each (name, value) pair `pairsOf` gives. */
  private sumBy(
    pairsOf: (row: RollupRow) => Array<[string, string]>,
  ): Array<[string, string, string, string, { energy_wh: number; points: number }]> {
    const sums = new Map<string, [string, string, string, string, { energy_wh: number; points: number }]>();
    for (const row of this.rows.values()) {
      const day = row.bucket.slice(0, 10);
      for (const [name, value] of pairsOf(row)) {
        const key = JSON.stringify([row.account_id, name, day, value]);
        let entry = sums.get(key);
        if (!entry) sums.set(key, (entry = [row.account_id, name, day, value, { energy_wh: 0, points: 0 }]));
        entry[4].energy_wh += row.energy_wh;
        entry[4].points += row.points;
      }
    }
    return [...sums.values()];
  }
}

/**
 * Every field written out in one literal: a row built by spreading computed keys becomes a
 * dictionary-mode object, and with two rows per reading that was the largest cost of a batch in
 * the CPU profile (bench/luminaire-ingest.bench.ts --profile).
 */
function emptyRow(input: RollupInput & { bucket: string }): RollupRow {
  return {
    device_id: input.deviceId,
    bucket: input.bucket,
    attribution_id: input.attributionId,
    account_id: input.accountId,
    points: 0,
    energy_wh: 0,
    gear_operating_s: 0,
    gear_starts: 0,
    gear_thermal_derating: 0,
    gear_thermal_shutdown: 0,
    supply_undervoltage: 0,
    supply_overvoltage: 0,
    source_on_s: 0,
    source_starts: 0,
    source_failures: 0,
    lifetime_energy_wh: null,
    lifetime_burn_s: null,
    power_sum: 0,
    power_n: 0,
    power_max: null,
    gear_temp_sum: 0,
    gear_temp_n: 0,
    gear_temp_max: null,
    source_temp_sum: 0,
    source_temp_n: 0,
    source_temp_max: null,
    output_sum: 0,
    output_n: 0,
    supply_voltage_min: null,
    supply_voltage_max: null,
    counter_resets: 0,
  };
}
