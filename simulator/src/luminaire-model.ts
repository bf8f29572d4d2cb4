import type { LuminaireReading } from '#protocol/luminaire-fields';

/**
 * A street or office luminaire as its D4i control gear would report it: a dimming schedule by
 * local time, power that follows the output level, energy that is the integral of power,
 * temperatures that lag behind load and ambient, operating time and starts that advance, and now
 * and then a replaced driver whose counters start again from zero.
 */
export interface LuminaireModelOptions {
  /** Rated power at 100 % output (W). Default 40. */
  ratedPowerW?: number;
  /** IANA zone of the schedule (the device configuration's `timezone`). Default UTC. */
  timeZone?: string;
  /** Probability per simulated day that the driver is replaced. Default 0.002. */
  driverReplacementPerDay?: number;
  random?: () => number;
  /** The light source failed (`--failing-drivers`): the luminaire stays dark whatever the schedule. */
  sourceFailed?: () => boolean;
}

interface GearCounters {
  energyWh: number;
  operatingS: number;
  starts: number;
  derating: number;
  sourceOnS: number;
  sourceStarts: number;
}

const fresh = (): GearCounters => ({
  energyWh: 0,
  operatingS: 0,
  starts: 0,
  derating: 0,
  sourceOnS: 0,
  sourceStarts: 0,
});

/** Output level (%) a night-time schedule asks for at this local hour (0..24, fractional). */
export function scheduledLevel(hour: number): number {
  if (hour >= 7 && hour < 17) return 0; // daylight: off
  if (hour >= 17 && hour < 23) return 100; // evening: full
  if (hour >= 23 || hour < 5) return 40; // night: dimmed
  return 70; // early morning
}

export function localHour(at: Date, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-GB', {
    timeZone,
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(at);
  const h = Number(parts.find((p) => p.type === 'hour')?.value ?? 0);
  const m = Number(parts.find((p) => p.type === 'minute')?.value ?? 0);
  return h + m / 60;
}

export class LuminaireModel {
  private counters: GearCounters;
  private level = 0;
  private gearTempC: number;
  private sourceTempC: number;
  private last: Date | null = null;
  private readonly ratedPowerW: number;
  private readonly random: () => number;

  constructor(private readonly options: LuminaireModelOptions = {}) {
    this.random = options.random ?? Math.random;
    this.ratedPowerW = options.ratedPowerW ?? 40;
    // A fleet is installed over years: each luminaire starts with some history.
    const ageS = Math.floor(this.random() * 3 * 365 * 86_400 * 0.4);
    this.counters = {
      energyWh: Math.round((ageS / 3600) * this.ratedPowerW * 0.6),
      operatingS: ageS,
      starts: Math.floor(ageS / 86_400),
      derating: 0,
      sourceOnS: ageS,
      sourceStarts: Math.floor(ageS / 86_400),
    };
    this.gearTempC = 15;
    this.sourceTempC = 15;
  }

  /** Ambient temperature (°C): a daily swing around 12 °C. */
  private ambient(hour: number): number {
    return 12 + 6 * Math.sin(((hour - 9) / 24) * 2 * Math.PI);
  }

  /** Advances the luminaire to `at` and answers the reading it reports then. */
  read(at: Date): LuminaireReading {
    const hour = localHour(at, this.options.timeZone ?? 'UTC');
    const dtS = this.last ? Math.max(0, (at.getTime() - this.last.getTime()) / 1000) : 0;
    this.last = at;
    if (this.random() < ((this.options.driverReplacementPerDay ?? 0.002) * dtS) / 86_400) this.counters = fresh();
    const target = this.options.sourceFailed?.() ? 0 : scheduledLevel(hour);
    const wasOn = this.level > 0;
    const powerBefore = this.power(this.level);
    this.level = target;
    const powerNow = this.power(target);
    if (target > 0 && !wasOn) {
      this.counters.starts += 1;
      this.counters.sourceStarts += 1;
    }
    // Energy is power integrated over the interval (trapezoid between the two readings).
    this.counters.energyWh += ((powerBefore + powerNow) / 2) * (dtS / 3600);
    this.counters.operatingS += dtS;
    if (target > 0 || wasOn) this.counters.sourceOnS += wasOn && target > 0 ? dtS : dtS / 2;
    // Temperatures approach ambient plus a rise proportional to the load (time constant 20 min).
    const ambient = this.ambient(hour);
    const k = 1 - Math.exp(-dtS / 1200);
    this.gearTempC += (ambient + powerNow * 0.9 - this.gearTempC) * (dtS ? k : 1);
    this.sourceTempC += (ambient + powerNow * 1.2 - this.sourceTempC) * (dtS ? k : 1);
    if (this.gearTempC > 75) this.counters.derating += 1;
    return {
      at: at.toISOString(),
      energy_wh: Math.floor(this.counters.energyWh),
      power_w: Math.round(powerNow * 10) / 10,
      gear_operating_s: Math.floor(this.counters.operatingS),
      gear_starts: this.counters.starts,
      gear_temp_c: Math.round(this.gearTempC * 10) / 10,
      gear_thermal_derating: this.counters.derating,
      gear_thermal_shutdown: 0,
      supply_voltage_v: Math.round((230 + (this.random() - 0.5) * 8) * 10) / 10,
      supply_undervoltage: 0,
      supply_overvoltage: 0,
      source_on_s: Math.floor(this.counters.sourceOnS),
      source_starts: this.counters.sourceStarts,
      source_temp_c: Math.round(this.sourceTempC * 10) / 10,
      source_failures: 0,
      output_level_pct: target,
      rated_life_h: 100_000,
    };
  }

  /** Driver losses make power a little more than proportional to output; standby 0.4 W. */
  private power(level: number): number {
    return level === 0 ? 0.4 : 0.4 + this.ratedPowerW * (0.08 + 0.92 * (level / 100));
  }
}
