import { ratioEstimate, ratioLowerBound, ratioPValue } from './rate-ratio';

/**
 * The fixture signals a rollout's health gate can name (docs/ota.md "Health gate"): counts from
 * the luminaire roll-ups (D4i counters) and the device's connection history, each as a rate per
 * 1,000 device-days.
 */
export const FIXTURE_SIGNALS = [
  'thermal_derating',
  'thermal_shutdown',
  'supply_faults',
  'source_failures',
  'unexpected_reboots',
  'reconnects',
] as const;
export type FixtureSignal = (typeof FIXTURE_SIGNALS)[number];

/**
 * The signals measured from the luminaire roll-ups today, which a rollout may name. Unexpected
 * reboots and reconnects per device-day are not yet rolled up per firmware version (the
 * reconnect rule of the gate judges each updated device on its own meanwhile).
 */
export const MEASURED_SIGNALS = [
  'thermal_derating',
  'thermal_shutdown',
  'supply_faults',
  'source_failures',
] as const satisfies readonly FixtureSignal[];

/** Events and exposure of a group of devices (updated, control or baseline). */
export interface GroupExposure {
  devices: number;
  /** Device-days with readings (hourly roll-ups / 24). */
  deviceDays: number;
  counts: Record<FixtureSignal, number>;
}

export interface FixtureGateSettings {
  signals: FixtureSignal[];
  /** Pause when updated/control is shown to be above this ratio. */
  maxRatio: number;
  /** Exposure each group needs before the gate judges (device-days). */
  minDeviceDays: number;
  /** Events the updated group needs on a signal before that signal can pause (absolute minimum). */
  minEvents: number;
  /** One-sided confidence of the decision; split over the named signals (Bonferroni). */
  confidence: number;
}

export const SIGNAL_VERDICTS = ['worse', 'within_ratio', 'too_few_events'] as const;
export type SignalVerdict = (typeof SIGNAL_VERDICTS)[number];

export interface SignalEvidence {
  signal: FixtureSignal;
  updated: { events: number; per1000DeviceDays: number };
  control: { events: number; per1000DeviceDays: number };
  /** Updated rate / control rate, 0.5 added to both counts (finite when control saw none). */
  ratio: number;
  /** The ratio's one-sided lower confidence bound at the gate's (per-signal) confidence. */
  ratioLowerBound: number;
  /** One-sided p-value of "updated/control ≤ maxRatio". */
  pValue: number;
  verdict: SignalVerdict;
}

/**
 * - `off`: the rollout names no fixture signal.
 * - `insufficient_exposure`: updated, or both control and baseline, below `minDeviceDays`: no judgement yet, no pause.
 * - `pass`: judged, no signal worse beyond the ratio.
 * - `pause`: at least one signal worse beyond the ratio: the deployment pauses (reason `fixture_health`).
 */
export const GATE_STATES = ['off', 'insufficient_exposure', 'pass', 'pause'] as const;
export type GateState = (typeof GATE_STATES)[number];

export interface GateDecision {
  state: GateState;
  /** What the updated group was compared with: the not-yet-updated devices of the model, or, when those are too few (the last batch), the same model before the deployment. */
  comparedWith: 'control' | 'baseline' | null;
  updated: { devices: number; deviceDays: number };
  control: { devices: number; deviceDays: number } | null;
  signals: SignalEvidence[];
  /** In words, for the deployment page and the pause's history entry. */
  summary: string;
}

export const per1000 = (events: number, deviceDays: number): number =>
  deviceDays > 0 ? Math.round((events / deviceDays) * 1000 * 100) / 100 : 0;

const sig = (n: number): number => Number(n.toPrecision(4));

/** The gate's judgement of one deployment and model (pure; the caller gathers the groups). */
export function decideFixtureGate(
  input: { updated: GroupExposure; control: GroupExposure | null; baseline: GroupExposure | null },
  s: FixtureGateSettings,
): GateDecision {
  const updatedSize = { devices: input.updated.devices, deviceDays: sig(input.updated.deviceDays) };
  const none = (state: GateState, summary: string): GateDecision => ({
    state,
    comparedWith: null,
    updated: updatedSize,
    control: null,
    signals: [],
    summary,
  });
  if (s.signals.length === 0) return none('off', 'No fixture signals named: the gate watches reconnects only.');
  if (input.updated.deviceDays < s.minDeviceDays)
    return none(
      'insufficient_exposure',
      `Updated devices have ${sig(input.updated.deviceDays)} of the ${s.minDeviceDays} device-days the gate needs.`,
    );
  const enough = (g: GroupExposure | null): g is GroupExposure => g !== null && g.deviceDays >= s.minDeviceDays;
  const comparedWith = enough(input.control) ? 'control' : enough(input.baseline) ? 'baseline' : null;
  if (comparedWith === null)
    return none(
      'insufficient_exposure',
      `Neither the not-yet-updated devices (${sig(input.control?.deviceDays ?? 0)}) nor the model before the deployment (${sig(input.baseline?.deviceDays ?? 0)}) have the ${s.minDeviceDays} device-days the gate needs.`,
    );
  const other = comparedWith === 'control' ? input.control! : input.baseline!;
  const alpha = (1 - s.confidence) / s.signals.length;
  const signals = s.signals.map((signal): SignalEvidence => {
    const counts = {
      x1: input.updated.counts[signal],
      t1: input.updated.deviceDays,
      x2: other.counts[signal],
      t2: other.deviceDays,
    };
    const pValue = ratioPValue(counts, s.maxRatio);
    const verdict: SignalVerdict =
      counts.x1 < s.minEvents ? 'too_few_events' : pValue < alpha ? 'worse' : 'within_ratio';
    return {
      signal,
      updated: { events: counts.x1, per1000DeviceDays: per1000(counts.x1, counts.t1) },
      control: { events: counts.x2, per1000DeviceDays: per1000(counts.x2, counts.t2) },
      ratio: sig(ratioEstimate(counts)),
      ratioLowerBound: sig(ratioLowerBound(counts, alpha)),
      pValue: sig(pValue),
      verdict,
    };
  });
  const worse = signals.filter((e) => e.verdict === 'worse');
  const against = comparedWith === 'control' ? 'not-yet-updated devices' : 'the model before the deployment';
  const summary =
    worse.length > 0
      ? worse
          .map(
            (e) =>
              `${e.signal.replace(/_/g, ' ')}: ${e.updated.per1000DeviceDays} per 1,000 device-days updated against ${e.control.per1000DeviceDays} for ${against} (ratio ${e.ratio}, at least ${e.ratioLowerBound} at ${Math.round(s.confidence * 100)} % confidence, limit ${s.maxRatio})`,
          )
          .join('; ')
      : `No signal worse than ${s.maxRatio}× ${against}.`;
  return {
    state: worse.length > 0 ? 'pause' : 'pass',
    comparedWith,
    updated: updatedSize,
    control: { devices: other.devices, deviceDays: sig(other.deviceDays) },
    signals,
    summary,
  };
}
