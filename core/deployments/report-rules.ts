import { assertNever } from '../shared/errors';
import { versionKey } from '../shared/version';
import type { OtaProgressReport } from '../devices/device-gateway';
import type { OtaErrorCode } from '#protocol/payloads';
import type { UpdateRef, UpdateState } from './deployment-types';

/** What a device may report on ota/progress. */
export type ReportedState = 'downloading' | 'installing' | 'rebooting' | 'succeeded' | 'failed' | 'rolled_back';

/**
 * The transition table for device reports. Steps only move forward (a late `downloading` after
 * `installing` is out of order and ignored); the same step again only updates the progress.
 * `succeeded` is not final by itself: it becomes `succeeded` when the device is already on the
 * target version, otherwise `rebooting` with `reported_success_at` until the heartbeat confirms.
 */
const STEP_RANK: Record<'sent' | 'downloading' | 'installing' | 'rebooting', number> = {
  sent: 0,
  downloading: 1,
  installing: 2,
  rebooting: 3,
};

export type ReportDecision =
  | { kind: 'ignore'; reason: 'finished' | 'not_sent' | 'out_of_order' }
  | { kind: 'step'; state: 'downloading' | 'installing' | 'rebooting' }
  | { kind: 'reported_success' }
  | { kind: 'final'; state: 'failed' | 'rolled_back' };

export function decideReport(current: UpdateState, reported: ReportedState): ReportDecision {
  switch (current) {
    case 'succeeded':
    case 'failed':
    case 'timed_out':
    case 'cancelled':
    case 'rolled_back':
      return { kind: 'ignore', reason: 'finished' };
    case 'queued':
      return { kind: 'ignore', reason: 'not_sent' };
    case 'sent':
    case 'downloading':
    case 'installing':
    case 'rebooting':
      switch (reported) {
        case 'downloading':
        case 'installing':
        case 'rebooting':
          return STEP_RANK[reported] >= STEP_RANK[current]
            ? { kind: 'step', state: reported }
            : { kind: 'ignore', reason: 'out_of_order' };
        case 'succeeded':
          return { kind: 'reported_success' };
        case 'failed':
          return { kind: 'final', state: 'failed' };
        case 'rolled_back':
          return { kind: 'final', state: 'rolled_back' };
        default:
          return assertNever(reported, 'reported state');
      }
    default:
      return assertNever(current, 'update state');
  }
}

/** A reported step to write for one update: its last state and progress, every state it passed. */
export interface StepWrite {
  row: UpdateRef;
  state: 'downloading' | 'installing' | 'rebooting';
  progress: number | null;
  /** The states the update passed through in this batch (each gets a history row and event). */
  transitions: string[];
  reportedSuccess: boolean;
  deadline: Date;
}

/** An update a progress report names, with its state and what its device last said it runs. */
export interface ReportedUpdate extends UpdateRef {
  state: UpdateState;
  /** The reported firmware's key; null until the device reported one. */
  firmwareKey: string | null;
}

export interface ProgressItem {
  accountId: string;
  deviceId: string;
  report: OtaProgressReport;
}

/** Timing the report handling needs (the engine's options). */
export interface ReportTiming {
  stepTimeoutMs: number;
  bootTimeoutMs: number;
}

/** The updates that end with this batch of reports, one group per distinct (state, error, error code). */
export interface FinalGroup {
  state: 'succeeded' | 'failed' | 'rolled_back';
  error: string | null;
  /** The device's reason from the protocol's vocabulary (failed and rolled_back); null when it gave none. */
  errorCode: OtaErrorCode | null;
  ids: string[];
}

/**
 * Applies a batch of progress reports, in arrival order, to the state machine of the updates
 * they name (`updates`, read and locked by the caller): what to write for each update (its last
 * step, every state it passed through) and which end. A report of an unknown job, or of another
 * device's (or account's) job, is ignored as `unknown_job`. A reported success completes the
 * update when the device already runs the target version; otherwise the device has the boot
 * timeout to come back on it.
 */
export function foldReports(
  updates: readonly ReportedUpdate[],
  items: readonly ProgressItem[],
  context: { now: Date; timing: ReportTiming },
): { ignored: string[]; steps: StepWrite[]; finals: FinalGroup[] } {
  const { now, timing } = context;
  const byId = new Map(updates.map((r) => [r.id, { row: r, state: r.state }]));
  const ignored: string[] = [];
  const steps = new Map<string, StepWrite>();
  const finals = new Map<
    string,
    { state: 'succeeded' | 'failed' | 'rolled_back'; error: string | null; errorCode: OtaErrorCode | null }
  >();
  for (const { accountId, deviceId, report } of items) {
    const entry = byId.get(report.jobId);
    // A job of another device (or account) is as unknown as a made-up one.
    if (!entry || entry.row.deviceId !== deviceId || entry.row.accountId !== accountId) {
      ignored.push('unknown_job');
      continue;
    }
    const decision = decideReport(entry.state, report.state);
    switch (decision.kind) {
      case 'ignore':
        ignored.push(decision.reason);
        break;
      case 'step':
      case 'reported_success': {
        const confirmed =
          decision.kind === 'reported_success' &&
          entry.row.firmwareKey !== null &&
          entry.row.firmwareKey === versionKey(entry.row.targetVersion);
        if (confirmed) {
          finals.set(entry.row.id, { state: 'succeeded', error: null, errorCode: null });
          steps.delete(entry.row.id);
          entry.state = 'succeeded';
          break;
        }
        const state = decision.kind === 'step' ? decision.state : 'rebooting';
        const write = steps.get(entry.row.id) ?? {
          row: entry.row,
          state,
          progress: null,
          transitions: [],
          reportedSuccess: false,
          deadline: now,
        };
        if (state !== entry.state || decision.kind === 'reported_success') write.transitions.push(state);
        write.state = state;
        write.progress = decision.kind === 'reported_success' ? 100 : (report.progress ?? write.progress);
        write.reportedSuccess ||= decision.kind === 'reported_success';
        // Boot-confirmed success: after `succeeded` the device has the boot timeout to come back on the version.
        write.deadline = new Date(
          now.getTime() + (write.reportedSuccess ? timing.bootTimeoutMs : timing.stepTimeoutMs),
        );
        steps.set(entry.row.id, write);
        entry.state = state;
        break;
      }
      case 'final':
        finals.set(entry.row.id, {
          state: decision.state,
          error: report.error ?? (decision.state === 'failed' ? 'failed' : 'rolled back by the device'),
          errorCode: report.errorCode ?? null,
        });
        steps.delete(entry.row.id);
        entry.state = decision.state;
        break;
      default:
        return assertNever(decision, 'report decision');
    }
  }
  // Grouped by outcome, message and code: one statement per distinct (state, error, error code).
  const groups = new Map<string, FinalGroup>();
  for (const [id, f] of finals) {
    const key = `${f.state}\u0000${f.error ?? ''}\u0000${f.errorCode ?? ''}`;
    const g = groups.get(key) ?? { ...f, ids: [] };
    g.ids.push(id);
    groups.set(key, g);
  }
  return { ignored, steps: [...steps.values()], finals: [...groups.values()] };
}

/** An unfinished update of a device that just said (heartbeat) what it runs. */
export interface ActiveUpdate {
  id: string;
  deviceId: string;
  accountId: string;
  deploymentId: string;
  state: UpdateState;
  targetVersion: string;
}

/**
 * Heartbeats against the unfinished updates of their devices: a device on its update's target
 * version completes it (`confirm`: boot confirmation, or a lost `succeeded`; `already`: a queued
 * update whose target it already runs, installed over USB, completes without a command); the
 * other queued updates of those devices may be sent now (`waiting`, per deployment). An update
 * of another account than the heartbeat's is not touched.
 */
export function matchHeartbeats(
  updates: readonly ActiveUpdate[],
  heartbeats: ReadonlyArray<{ accountId: string; deviceId: string; firmware: string }>,
): { confirm: string[]; already: string[]; waiting: Map<string, string[]> } {
  const reported = new Map(heartbeats.map((r) => [r.deviceId, versionKey(r.firmware)]));
  const accountOf = new Map(heartbeats.map((r) => [r.deviceId, r.accountId]));
  const confirm: string[] = [];
  const already: string[] = [];
  const waiting = new Map<string, string[]>();
  for (const r of updates) {
    if (accountOf.get(r.deviceId) !== r.accountId) continue;
    if (reported.get(r.deviceId) === versionKey(r.targetVersion)) (r.state === 'queued' ? already : confirm).push(r.id);
    else if (r.state === 'queued') waiting.set(r.deploymentId, [...(waiting.get(r.deploymentId) ?? []), r.deviceId]);
  }
  return { confirm, already, waiting };
}
