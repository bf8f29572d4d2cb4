import { createHash } from 'node:crypto';
import type { LuminaireReading } from '#protocol/luminaire-fields';

/**
 * Faults the simulator adds on top of a healthy luminaire (`--failing-drivers`, `--bad-firmware`),
 * so that a demo shows a maintenance alert and a rollout paused by the fixture health gate.
 * Counted per reading, not per hour: the demo runs at `--luminaire 5` as well as at 900 s.
 */
export interface LuminaireFaultOptions {
  /** This device's driver degrades and then fails (chosen by `failingDriverSerials`). */
  failingDriver?: boolean;
  /** Readings from the first sign of wear to the light source failure. Default 48 (12 h at 900 s). */
  failingDriverReadings?: number;
  /** Devices running this version derate and see supply faults far more often. */
  badFirmware?: string;
}

/** Readings a failing driver takes to fail when not told otherwise. */
export const DEFAULT_FAILING_DRIVER_READINGS = 48;

/** Position of a serial in the deterministic order (same serial, same place, in every run). */
function serialRank(serial: string): string {
  return createHash('sha256').update(`failing-driver:${serial}`).digest('hex');
}

/**
 * Which serials get a failing driver: `share` (0..1) of them, at least one when the share is
 * above zero, taken in an order fixed by a hash of each serial, so the same fleet always has the
 * same failing devices and they are spread over the serial range rather than the first ones.
 */
export function failingDriverSerials(serials: string[], share: number): Set<string> {
  if (!(share > 0) || serials.length === 0) return new Set();
  const count = Math.min(serials.length, Math.max(1, Math.round(share * serials.length)));
  const ordered = [...serials].sort((a, b) => (serialRank(a) < serialRank(b) ? -1 : 1));
  return new Set(ordered.slice(0, count));
}

interface Extra {
  derating: number;
  shutdown: number;
  undervoltage: number;
  overvoltage: number;
  sourceFailures: number;
}

const none = (): Extra => ({ derating: 0, shutdown: 0, undervoltage: 0, overvoltage: 0, sourceFailures: 0 });

/**
 * Adds the fault counters to each reading. A failing driver goes through three stages, each a
 * third of `failingDriverReadings`: occasional thermal derating and a warmer gear; then derating
 * every reading plus supply faults of its input stage; then thermal shutdowns; then the light
 * source fails (one failure event, and `sourceFailed()` answers true so the model stays dark).
 * A replaced driver (counters going down) starts from a clean slate: the replacement is healthy.
 */
export class LuminaireFaults {
  private extra = none();
  private readings = 0;
  /** This driver is degrading (false again once it is replaced). */
  failingDriver: boolean;
  private lastOperatingS = -1;
  failed = false;

  constructor(
    private readonly options: LuminaireFaultOptions,
    private readonly random: () => number,
  ) {
    this.failingDriver = options.failingDriver === true;
  }

  /** The light source failed: the luminaire gives no light from now on. */
  sourceFailed(): boolean {
    return this.failed;
  }

  /** The reading as reported, with this device's faults added for the firmware it runs now. */
  apply(reading: LuminaireReading, firmware: string): LuminaireReading {
    const operatingS = reading.gear_operating_s ?? 0;
    if (operatingS < this.lastOperatingS) {
      this.extra = none();
      this.failingDriver = false;
      this.failed = false;
    }
    this.lastOperatingS = operatingS;
    let gearRiseC = 0;
    if (this.failingDriver) gearRiseC = this.wear();
    if (this.options.badFirmware !== undefined && firmware === this.options.badFirmware) {
      // Several times what a healthy fleet shows: the gate must see it over a day's exposure.
      if (this.random() < 0.5) this.extra.derating += 1;
      if (this.random() < 0.3) this.extra.undervoltage += 1;
      if (this.random() < 0.1) this.extra.overvoltage += 1;
    }
    const gearTemp = reading.gear_temp_c;
    return {
      ...reading,
      ...(gearTemp !== undefined ? { gear_temp_c: Math.round((gearTemp + gearRiseC) * 10) / 10 } : {}),
      gear_thermal_derating: (reading.gear_thermal_derating ?? 0) + this.extra.derating,
      gear_thermal_shutdown: (reading.gear_thermal_shutdown ?? 0) + this.extra.shutdown,
      supply_undervoltage: (reading.supply_undervoltage ?? 0) + this.extra.undervoltage,
      supply_overvoltage: (reading.supply_overvoltage ?? 0) + this.extra.overvoltage,
      source_failures: (reading.source_failures ?? 0) + this.extra.sourceFailures,
    };
  }

  /** One reading further into a failing driver's decline; answers how much warmer its gear runs (°C). */
  private wear(): number {
    if (this.failed) return 0;
    this.readings += 1;
    const total = Math.max(3, this.options.failingDriverReadings ?? DEFAULT_FAILING_DRIVER_READINGS);
    const stage = Math.floor((3 * this.readings) / total);
    if (stage >= 3) {
      this.extra.sourceFailures += 1;
      this.failed = true;
      return 0;
    }
    if (stage === 0) {
      if (this.readings % 2 === 0) this.extra.derating += 1;
      return 10;
    }
    this.extra.derating += stage + 1;
    this.extra.undervoltage += 1;
    if (stage === 2) {
      this.extra.overvoltage += 1;
      if (this.readings % 3 === 0) this.extra.shutdown += 1;
    }
    return 10 + 10 * stage;
  }
}
