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
 * The signals counted in the device's connection days (device_connection_days) rather than the
 * luminaire roll-ups: their exposure is the days the device was heard (connected or reporting),
 * which also covers devices that send no luminaire data.
 */
export const CONNECTION_SIGNALS = ['unexpected_reboots', 'reconnects'] as const satisfies readonly FixtureSignal[];
export const isConnectionSignal = (s: FixtureSignal): boolean => (CONNECTION_SIGNALS as readonly string[]).includes(s);

/** Events and exposure of a group of devices (updated, control or baseline). */
export interface GroupExposure {
  devices: number;
  /** Device-days with luminaire readings (hourly roll-ups / 24): the exposure of the luminaire signals. */
  deviceDays: number;
  /** Device-days the devices were heard (connection days): the exposure of reboots and reconnects. */
  connectedDeviceDays: number;
  counts: Record<FixtureSignal, number>;
}

/** The exposure a signal's rate is over (device-days). */
export const exposureOf = (g: GroupExposure, signal: FixtureSignal): number =>
  isConnectionSignal(signal) ? g.connectedDeviceDays : g.deviceDays;

/** The smallest exposure of a group over the named signals: what the minimum is checked against. */
const judgedExposure = (g: GroupExposure, signals: FixtureSignal[]): number =>
  Math.min(...signals.map((signal) => exposureOf(g, signal)));

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
  /** `deviceDays`: the exposure of this signal (luminaire days, or connection days for reboots and reconnects). */
  updated: { events: number; deviceDays: number; per1000DeviceDays: number };
  control: { events: number; deviceDays: number; per1000DeviceDays: number };
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
  updated: GroupSize;
  control: GroupSize | null;
  signals: SignalEvidence[];
  /** In words, for the deployment page and the pause's history entry. */
  summary: string;
}

export interface GroupSize {
  devices: number;
  deviceDays: number;
  connectedDeviceDays: number;
}

/**
 * A decision as stored (deployment_fixture_gate, the `deployment.paused` event): decisions
 * recorded before reboots and reconnects were measured lack their exposures.
 */
export type RecordedGroupSize = Omit<GroupSize, 'connectedDeviceDays'> & { connectedDeviceDays?: number };
export type RecordedSignalCount = Omit<SignalEvidence['updated'], 'deviceDays'> & { deviceDays?: number };

export const per1000 = (events: number, deviceDays: number): number =>
  deviceDays > 0 ? Math.round((events / deviceDays) * 1000 * 100) / 100 : 0;

const sig = (n: number): number => Number(n.toPrecision(4));

/** The gate's judgement of one deployment and model (pure; the caller gathers the groups). */
export function decideFixtureGate(
  input: { updated: GroupExposure; control: GroupExposure | null; baseline: GroupExposure | null },
  s: FixtureGateSettings,
): GateDecision {
  const size = (g: GroupExposure): GroupSize => ({
    devices: g.devices,
    deviceDays: sig(g.deviceDays),
    connectedDeviceDays: sig(g.connectedDeviceDays),
  });
  const updatedSize = size(input.updated);
  const none = (state: GateState, summary: string): GateDecision => ({
    state,
    comparedWith: null,
    updated: updatedSize,
    control: null,
    signals: [],
    summary,
  });
  if (s.signals.length === 0) return none('off', 'No fixture signals named: the gate watches reconnects only.');
  const updatedExposure = judgedExposure(input.updated, s.signals);
  if (updatedExposure < s.minDeviceDays)
    return none(
      'insufficient_exposure',
      `Updated devices have ${sig(updatedExposure)} of the ${s.minDeviceDays} device-days the gate needs.`,
    );
  const enough = (g: GroupExposure | null): g is GroupExposure =>
    g !== null && judgedExposure(g, s.signals) >= s.minDeviceDays;
  const comparedWith = enough(input.control) ? 'control' : enough(input.baseline) ? 'baseline' : null;
  if (comparedWith === null)
    return none(
      'insufficient_exposure',
      `Neither the not-yet-updated devices (${sig(input.control ? judgedExposure(input.control, s.signals) : 0)}) nor the model before the deployment (${sig(input.baseline ? judgedExposure(input.baseline, s.signals) : 0)}) have the ${s.minDeviceDays} device-days the gate needs.`,
    );
  const other = comparedWith === 'control' ? input.control! : input.baseline!;
  const alpha = (1 - s.confidence) / s.signals.length;
  const signals = s.signals.map((signal): SignalEvidence => {
    const counts = {
      x1: input.updated.counts[signal],
      t1: exposureOf(input.updated, signal),
      x2: other.counts[signal],
      t2: exposureOf(other, signal),
    };
    const pValue = ratioPValue(counts, s.maxRatio);
    const verdict: SignalVerdict =
      counts.x1 < s.minEvents ? 'too_few_events' : pValue < alpha ? 'worse' : 'within_ratio';
    return {
      signal,
      updated: { events: counts.x1, deviceDays: sig(counts.t1), per1000DeviceDays: per1000(counts.x1, counts.t1) },
      control: { events: counts.x2, deviceDays: sig(counts.t2), per1000DeviceDays: per1000(counts.x2, counts.t2) },
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
    control: size(other),
    signals,
    summary,
  };
}
