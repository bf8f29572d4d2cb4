import type { HealthThresholds } from './health-thresholds';

/**
 * Fixture health (docs/fixture-health.md), worst first when sorted by rank:
 * - `ok`: nothing past a threshold.
 * - `watch`: something to look at on the next visit (ageing, warm, occasional faults).
 * - `replace_soon`: plan a replacement (past rated life, frequent derating or shutdowns).
 * - `failed`: the light source failed; the fixture gives no (or not its) light.
 * Persisted and sent in `device.health_changed`: never rename a value.
 */
export const HEALTH_STATES = ['ok', 'watch', 'replace_soon', 'failed'] as const;
export type HealthState = (typeof HEALTH_STATES)[number];

export const healthRank = (state: HealthState): number => HEALTH_STATES.indexOf(state);
export const worseOf = (a: HealthState, b: HealthState): HealthState => (healthRank(a) >= healthRank(b) ? a : b);

export const HEALTH_RULES = [
  'rated_life',
  'gear_temperature',
  'thermal_derating',
  'thermal_shutdown',
  'supply_faults',
  'source_failures',
] as const;
export type HealthRule = (typeof HEALTH_RULES)[number];

/** What the rules read: a device's lifetime figures and the sums of its daily roll-ups over the window. */
export interface HealthInput {
  /** Light source on-time over every driver (h), or the gear's operating time; null: never reported. */
  operatingHours: number | null;
  /** Rated life the driver reports (MB207); null: the model's `rated_life_h`. */
  ratedLifeH: number | null;
  /** The look-back window (`window_days`), over the days that have readings. */
  window: {
    /** Days of the window with at least one reading (device-days); 0: the rate rules say nothing. */
    days: number;
    thermalDerating: number;
    thermalShutdown: number;
    supplyUndervoltage: number;
    supplyOvervoltage: number;
    sourceFailures: number;
    /** Highest control gear temperature read in the window (°C), null: none read. */
    gearTempMaxC: number | null;
  };
  /**
   * The light source failure counter (D4i), for the `failed` state that sticks until the counter
   * restarts (docs/fixture-health.md "Failed sticks"). Absent or null: the device never reported it.
   */
  sourceFailureCounter?: {
    /** Which segment of the counter is current (its offset, core/luminaire/counter-segments.ts): it changes only when the counter restarts. */
    segment: number;
    /** The counter's value in the current segment: failures since it restarted (meaningful once it has restarted). */
    value: number;
  } | null;
  /** Where an earlier verdict found the light source failed (stored with the verdict); null: never. */
  failedMark?: FailureMark | null;
}

/** The counter segment in which a device was judged failed by its light source failure counter. */
export interface FailureMark {
  segment: number;
  failures: number;
  /** When it was first judged failed in that segment (ISO 8601). */
  at: string;
}

export interface HealthReason {
  rule: HealthRule;
  /** The state this reason alone calls for. */
  state: Exclude<HealthState, 'ok'>;
  /** In words, with the figures: what a maintenance planner reads. */
  text: string;
  value: number;
  limit: number;
}

export interface HealthVerdict {
  state: HealthState;
  /**
   * What to store for the next verdict: the segment in which the light source failure counter
   * made the device `failed` (`at` is filled in by the caller when the mark is new), the earlier
   * mark when the counter has restarted since (it keeps the old driver's failures out of the
   * window), null when never failed.
   */
  failedMark: (Omit<FailureMark, 'at'> & { at: string | null }) | null;
  /** Worst first. */
  reasons: HealthReason[];
  /**
   * Sort key of the maintenance list (higher is more urgent): the state's rank, then how far the
   * worst reason is past its limit (value / limit, capped), so of two `replace_soon` fixtures the
   * one further past its threshold comes first.
   */
  urgency: number;
}

/** "1 time", "2 times": reason texts are read by people. */
export const plural = (n: number, one: string, many = `${one}s`): string =>
  `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

const round = (n: number, digits = 1): number => Math.round(n * 10 ** digits) / 10 ** digits;
const fmt = (n: number): string => round(n).toLocaleString('en-US');

/** Both levels of a "higher is worse" rule; `null` when the value is below the lower one. */
function graded(
  value: number,
  levels: { watch: number; worse: number; worseState: Exclude<HealthState, 'ok'> },
): { state: Exclude<HealthState, 'ok'>; limit: number } | null {
  if (value >= levels.worse) return { state: levels.worseState, limit: levels.worse };
  if (value >= levels.watch) return { state: 'watch', limit: levels.watch };
  return null;
}

/** Each rule of docs/fixture-health.md, in the order of the table there. */
export function evaluateHealth(input: HealthInput, t: HealthThresholds): HealthVerdict {
  const reasons: HealthReason[] = [];
  const add = (
    rule: HealthRule,
    hit: ReturnType<typeof graded>,
    value: number,
    text: (limit: number) => string,
  ): void => {
    if (hit) reasons.push({ rule, state: hit.state, value: round(value, 3), limit: hit.limit, text: text(hit.limit) });
  };

  const w = input.window;
  const failed = sourceFailureRule(input, t);
  if (failed.reason) reasons.push(failed.reason);

  if (input.operatingHours !== null) {
    const rated = input.ratedLifeH ?? t.rated_life_h;
    const percent = (input.operatingHours / rated) * 100;
    add(
      'rated_life',
      graded(percent, { watch: t.life_watch_percent, worse: t.life_replace_percent, worseState: 'replace_soon' }),
      percent,
      (limit) =>
        `${fmt(input.operatingHours!)} operating hours: ${fmt(percent)} % of the rated life of ${fmt(rated)} h (limit ${fmt(limit)} %)`,
    );
  }

  if (w.gearTempMaxC !== null)
    add(
      'gear_temperature',
      graded(w.gearTempMaxC, { watch: t.gear_temp_watch_c, worse: t.gear_temp_replace_c, worseState: 'replace_soon' }),
      w.gearTempMaxC,
      (limit) =>
        `Driver reached ${fmt(w.gearTempMaxC!)} °C in the last ${plural(t.window_days, 'day')} (limit ${fmt(limit)} °C)`,
    );

  // Rates need days of data: a fixture with no reading in the window is judged on lifetime figures only.
  if (w.days > 0) {
    const perDay = (n: number): number => n / w.days;
    const derating = perDay(w.thermalDerating);
    add(
      'thermal_derating',
      graded(derating, {
        watch: t.derating_watch_per_day,
        worse: t.derating_replace_per_day,
        worseState: 'replace_soon',
      }),
      derating,
      (limit) => `Thermal derating ${fmt(derating)} times a day over ${plural(w.days, 'day')} (limit ${fmt(limit)})`,
    );
    const shutdownRate = perDay(w.thermalShutdown);
    if (w.thermalShutdown > 0 && shutdownRate >= t.shutdown_replace_per_day && t.shutdown_replace_per_day > 0)
      reasons.push({
        rule: 'thermal_shutdown',
        state: 'replace_soon',
        value: round(shutdownRate, 3),
        limit: t.shutdown_replace_per_day,
        text: `Thermal shutdown ${fmt(shutdownRate)} times a day over ${plural(w.days, 'day')} (limit ${fmt(t.shutdown_replace_per_day)})`,
      });
    else if (w.thermalShutdown >= t.shutdown_watch_count)
      reasons.push({
        rule: 'thermal_shutdown',
        state: 'watch',
        value: w.thermalShutdown,
        limit: t.shutdown_watch_count,
        text: `${plural(w.thermalShutdown, 'thermal shutdown')} in ${plural(w.days, 'day')} (limit ${t.shutdown_watch_count})`,
      });
    const supply = perDay(w.supplyUndervoltage + w.supplyOvervoltage);
    add(
      'supply_faults',
      graded(supply, { watch: t.supply_watch_per_day, worse: t.supply_replace_per_day, worseState: 'replace_soon' }),
      supply,
      (limit) =>
        `Supply voltage faults ${fmt(supply)} times a day (${w.supplyUndervoltage} under, ${w.supplyOvervoltage} over in ${plural(w.days, 'day')}; limit ${fmt(limit)}): mains or the driver's input stage`,
    );
  }

  reasons.sort(
    (a, b) => healthRank(b.state) - healthRank(a.state) || b.value / (b.limit || 1) - a.value / (a.limit || 1),
  );
  const state = reasons.reduce<HealthState>((s, r) => worseOf(s, r.state), 'ok');
  const worst = reasons[0];
  const past = worst ? Math.min(9.99, worst.value / (worst.limit || 1)) : 0;
  return { state, reasons, urgency: round(healthRank(state) * 10 + past, 3), failedMark: failed.mark };
}

/**
 * `source_failures` (docs/fixture-health.md "Failed sticks"): failures in the window make the
 * device `failed`, and it stays failed while the counter stays in the segment it failed in,
 * however far the window moves; a restart of the counter (a driver replaced) ends it. After a
 * restart, only the new segment's failures count (the window's sum still holds the old driver's).
 */
function sourceFailureRule(
  input: HealthInput,
  t: HealthThresholds,
): { reason: HealthReason | null; mark: HealthVerdict['failedMark'] } {
  const counter = input.sourceFailureCounter ?? null;
  const mark = input.failedMark ?? null;
  const limit = t.source_failures_failed_count;
  const sameSegment = mark !== null && counter !== null && counter.segment === mark.segment;
  const restarted = mark !== null && counter !== null && counter.segment !== mark.segment;
  const recent = restarted ? Math.min(input.window.sourceFailures, counter.value) : input.window.sourceFailures;
  if (recent >= limit) {
    const failures = sameSegment ? Math.max(recent, mark.failures) : recent;
    return {
      reason: {
        rule: 'source_failures',
        state: 'failed',
        value: recent,
        limit,
        text: `Light source failed ${plural(recent, 'time')} in the last ${plural(t.window_days, 'day')}`,
      },
      mark: { segment: counter?.segment ?? 0, failures, at: sameSegment ? mark.at : null },
    };
  }
  if (sameSegment)
    return {
      reason: {
        rule: 'source_failures',
        state: 'failed',
        value: mark.failures,
        limit,
        text: `Light source failed ${plural(mark.failures, 'time')} (first judged failed on ${mark.at.slice(0, 10)}); failed until its failure counter restarts (driver replaced)`,
      },
      mark,
    };
  return { reason: null, mark };
}
