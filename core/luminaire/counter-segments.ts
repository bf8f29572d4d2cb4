import { LUMINAIRE_COUNTERS, type LuminaireCounter, type LuminaireValues } from '#protocol/luminaire-fields';

/**
 * D4i counters (energy, operating time, starts, events) only count up, until the control gear is
 * replaced: the new driver's counters restart. A counter lower than its last value therefore
 * starts a new segment: the old segment's last value is added to the counter's offset (so the
 * luminaire's lifetime figures keep growing) and the new value counts in full, as a counter that
 * restarted from zero. A delta is never negative (docs/luminaire-data.md "Counters").
 */

/** One counter's segment: its last value as the gear reported it, and the sum of ended segments. */
export interface CounterSegment {
  last: number;
  offset: number;
}

export type CounterSegments = Partial<Record<LuminaireCounter, CounterSegment>>;

/** What the service knows of a device's luminaire between readings. */
export interface LuminaireCounters {
  /** Time of the newest reading applied; an older one (a late redelivery) moves no counter. */
  latestAt: Date | null;
  counters: CounterSegments;
}

/** What one reading adds: per-counter deltas (never negative) and the lifetime figures after it. */
export interface CounterContribution {
  deltas: Record<LuminaireCounter, number>;
  /** At least one counter went down with this reading (a driver replaced). */
  reset: boolean;
  /** Energy over every segment (Wh), null while the device never sent `energy_wh`. */
  lifetimeEnergyWh: number | null;
  /** Light source on-time over every segment (s): the burn hours, null while never sent. */
  lifetimeBurnS: number | null;
}

// A literal, not Object.fromEntries: that makes a dictionary-mode object, slow on the hot path.
const zeroDeltas = (): Record<LuminaireCounter, number> => ({
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
});

const lifetimeOf = (segment: CounterSegment | undefined): number | null =>
  segment ? segment.offset + segment.last : null;

/**
 * Applies a reading to the device's counters (mutating `state`) and answers what it adds. The
 * first value of a counter is its baseline (delta 0): what the gear counted before the service
 * heard it is in the lifetime figures but in no day's energy. A reading older than the newest
 * applied (QoS 1 redelivery after a reconnect) changes no counter: its gauges still count.
 */
export function applyCounters(
  state: LuminaireCounters,
  reading: { at: Date; values: LuminaireValues },
): CounterContribution {
  const deltas = zeroDeltas();
  let reset = false;
  const inOrder = state.latestAt === null || reading.at.getTime() >= state.latestAt.getTime();
  if (inOrder) {
    state.latestAt = reading.at;
    for (const counter of LUMINAIRE_COUNTERS) {
      const value = reading.values[counter];
      if (value === undefined) continue;
      const segment = state.counters[counter];
      if (!segment) {
        state.counters[counter] = { last: value, offset: 0 };
      } else if (value >= segment.last) {
        deltas[counter] = value - segment.last;
        segment.last = value;
      } else {
        segment.offset += segment.last;
        segment.last = value;
        deltas[counter] = value;
        reset = true;
      }
    }
  }
  return {
    deltas,
    reset,
    lifetimeEnergyWh: lifetimeOf(state.counters.energy_wh),
    lifetimeBurnS: lifetimeOf(state.counters.source_on_s),
  };
}
