import type {
  FleetEnergy,
  LuminaireBucket,
  LuminairePoint,
  LuminaireSeries,
  LuminaireSummary,
} from '#core/luminaire/luminaire-types';

/** Luminaire data -> wire format (snake_case; raw readings keep the device's own field names). */
export function presentSeries(s: LuminaireSeries) {
  return {
    serial: s.serial,
    resolution: s.resolution,
    from: s.from,
    to: s.to,
    truncated: s.truncated,
    points:
      s.resolution === 'raw'
        ? (s.points as LuminairePoint[]).map(presentPoint)
        : (s.points as LuminaireBucket[]).map(presentBucket),
  };
}

function presentPoint(p: LuminairePoint) {
  const { at, badClock, ...values } = p;
  return { at, bad_clock: badClock, ...values };
}

export function presentBucket(b: LuminaireBucket) {
  return {
    at: b.at,
    points: b.points,
    energy_wh: b.energyWh,
    lifetime_energy_wh: b.lifetimeEnergyWh,
    burn_hours: b.burnHours,
    power_avg_w: b.powerAvgW,
    power_max_w: b.powerMaxW,
    gear_temp_avg_c: b.gearTempAvgC,
    gear_temp_max_c: b.gearTempMaxC,
    source_temp_avg_c: b.sourceTempAvgC,
    source_temp_max_c: b.sourceTempMaxC,
    output_level_avg_pct: b.outputLevelAvgPct,
    supply_voltage_min_v: b.supplyVoltageMinV,
    supply_voltage_max_v: b.supplyVoltageMaxV,
    gear_operating_s: b.gearOperatingS,
    gear_starts: b.gearStarts,
    gear_thermal_derating: b.gearThermalDerating,
    gear_thermal_shutdown: b.gearThermalShutdown,
    supply_undervoltage: b.supplyUndervoltage,
    supply_overvoltage: b.supplyOvervoltage,
    source_on_s: b.sourceOnS,
    source_starts: b.sourceStarts,
    source_failures: b.sourceFailures,
    counter_resets: b.counterResets,
  };
}

export function presentSummary(s: LuminaireSummary | null) {
  if (!s) return null;
  return {
    latest: s.latest,
    latest_at: s.latestAt,
    lifetime_energy_kwh: s.lifetimeEnergyKwh,
    burn_hours: s.burnHours,
    rated_life_h: s.ratedLifeH,
    points: s.points,
    counter_resets: s.counterResets,
    bad_clock_count: s.badClockCount,
    last_bad_clock_at: s.lastBadClockAt,
    refused_fields: s.refusedFields,
  };
}

export function presentEnergy(e: FleetEnergy) {
  return {
    from: e.from,
    to: e.to,
    group_by: e.groupBy,
    unit: 'kWh' as const,
    days: e.days,
    groups: e.groups.map((g) => ({ key: g.key, total_kwh: g.totalKwh, kwh: g.kwh })),
  };
}
