/** What the luminaire service answers (adapters present it in their own wire format). */

/** One stored reading: the fields the device sent (absent ones are absent), and whether its clock was replaced. */
export interface LuminairePoint {
  at: string;
  badClock: boolean;
  energy_wh?: number;
  lifetime_energy_wh?: number;
  power_w?: number;
  gear_operating_s?: number;
  gear_starts?: number;
  gear_temp_c?: number;
  gear_thermal_derating?: number;
  gear_thermal_shutdown?: number;
  supply_voltage_v?: number;
  supply_undervoltage?: number;
  supply_overvoltage?: number;
  source_on_s?: number;
  source_starts?: number;
  source_temp_c?: number;
  source_failures?: number;
  output_level_pct?: number;
  rated_life_h?: number;
}

/** An hour or a UTC day of a device: energy and counters as deltas (never negative), gauges as average and extremes. */
export interface LuminaireBucket {
  at: string;
  points: number;
  energyWh: number;
  lifetimeEnergyWh: number | null;
  burnHours: number | null;
  powerAvgW: number | null;
  powerMaxW: number | null;
  gearTempAvgC: number | null;
  gearTempMaxC: number | null;
  sourceTempAvgC: number | null;
  sourceTempMaxC: number | null;
  outputLevelAvgPct: number | null;
  supplyVoltageMinV: number | null;
  supplyVoltageMaxV: number | null;
  gearOperatingS: number;
  gearStarts: number;
  gearThermalDerating: number;
  gearThermalShutdown: number;
  supplyUndervoltage: number;
  supplyOvervoltage: number;
  sourceOnS: number;
  sourceStarts: number;
  sourceFailures: number;
  counterResets: number;
}

export interface LuminaireSeries {
  serial: string;
  resolution: 'raw' | 'hour' | 'day';
  from: string;
  to: string;
  /** More than the most points one answer holds: ask for a shorter range or a coarser resolution. */
  truncated: boolean;
  points: Array<LuminairePoint | LuminaireBucket>;
}

/** On the device record: the latest values, lifetime figures and what was refused. */
export interface LuminaireSummary {
  /** The latest value of each field the device sent (snake_case, as on the wire). */
  latest: Record<string, number>;
  latestAt: string | null;
  /** Energy over every driver the luminaire had (kWh). */
  lifetimeEnergyKwh: number | null;
  /** Light source on-time over every driver (h). */
  burnHours: number | null;
  ratedLifeH: number | null;
  points: number;
  counterResets: number;
  badClockCount: number;
  lastBadClockAt: string | null;
  refusedFields: Record<string, { count: number; reason: string; value: string; at: string }>;
}

export interface FleetEnergy {
  from: string;
  to: string;
  groupBy: string;
  /** Every UTC day from `from` to `to`. */
  days: string[];
  /** One per group, largest first; `kwh[i]` belongs to `days[i]`; key null: no model/firmware/site/tag value. */
  groups: Array<{ key: string | null; kwh: number[]; totalKwh: number }>;
}

/** What fleet energy is grouped by (REST `group_by`, GraphQL `groupBy`). */
export type EnergyGrouping = { by: 'model' } | { by: 'firmware' } | { by: 'site' } | { by: 'tag'; key: string };
