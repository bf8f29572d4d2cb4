import {
  type BatchTally,
  type DeploymentCounts,
  type DeploymentRecord,
  type DeploymentStatus,
} from './deployment-types';

/** What an evaluation decides for a deployment (deployment-progress.ts writes it). */
export type ProgressDecision =
  | { kind: 'none' }
  /** A scheduled deployment whose time came starts running. */
  | { kind: 'start' }
  /** A cancelled deployment's sent updates all ended: it is finished. */
  | { kind: 'finish_cancelled' }
  | {
      kind: 'pause_failure_threshold';
      failures: number;
      openedTargets: number;
      thresholdPercent: number;
      batch: number;
    }
  | {
      kind: 'complete';
      status: Extract<DeploymentStatus, 'completed' | 'completed_with_failures' | 'superseded'>;
      failures: number;
    }
  | { kind: 'open_batch'; batch: number; percent: number }
  | { kind: 'pause_batch_below_minimum'; succeeded: number; openedTargets: number; batch: number };

export type EvaluatedDeployment = Pick<
  DeploymentRecord,
  'status' | 'scheduledAt' | 'finishedAt' | 'currentBatch' | 'failuresAcknowledged' | 'rollout'
>;

/**
 * Whether the evaluation of a deployment reads its batches' tallies: only running ones and
 * cancelled ones whose sent updates have not all ended move on them (a tally reads every update).
 */
export const evaluationNeedsTallies = (d: Pick<EvaluatedDeployment, 'status' | 'finishedAt'>): boolean =>
  d.status === 'running' || (d.status === 'cancelled' && d.finishedAt === null);

/**
 * Moves a deployment along from what its updates say (docs/ota.md "Staged rollout"):
 * - a scheduled deployment starts once its time came;
 * - failures (failed, timed_out, rolled_back, health-gate) beyond the acknowledged ones, as a
 *   share of the opened targets, above `failure_threshold_percent` pause it (`failure_threshold`);
 * - nothing left queued or in flight: `superseded` when newer deployments took over every
 *   target (it installed nothing: issue 27), else `completed_with_failures` if any failed, else
 *   `completed`;
 * - the next batch opens when the opened targets' success share (acknowledged failures left
 *   out) reaches `min_batch_success_percent`; when every opened target finished below it, the
 *   deployment pauses (`batch_success_below_minimum`) for a person to decide.
 * `tallies` are per batch (batches up to `currentBatch` are opened); unused unless
 * `evaluationNeedsTallies(d)`.
 */
export function evaluateProgress(
  d: EvaluatedDeployment,
  tallies: ReadonlyMap<number, BatchTally>,
  now: Date,
): ProgressDecision {
  if (d.status === 'scheduled')
    return d.scheduledAt && d.scheduledAt.getTime() <= now.getTime() ? { kind: 'start' } : { kind: 'none' };
  if (!evaluationNeedsTallies(d)) return { kind: 'none' };
  let activeAll = 0;
  let failuresAll = 0;
  let ownAll = 0;
  let supersededAll = 0;
  let opened = { total: 0, active: 0, succeeded: 0, failures: 0 };
  for (const [batch, t] of tallies) {
    activeAll += t.active;
    failuresAll += t.failures;
    ownAll += t.total;
    supersededAll += t.superseded;
    if (batch <= d.currentBatch)
      opened = {
        total: opened.total + t.total,
        active: opened.active + t.active,
        succeeded: opened.succeeded + t.succeeded,
        failures: opened.failures + t.failures,
      };
  }
  if (d.status === 'cancelled') {
    // Sent updates of a cancelled deployment still finish; it is finished when they did.
    return activeAll === 0 ? { kind: 'finish_cancelled' } : { kind: 'none' };
  }
  const threshold = d.rollout?.failure_threshold_percent;
  const newFailures = Math.max(0, opened.failures - d.failuresAcknowledged);
  if (threshold !== undefined && opened.total > 0 && (newFailures * 100) / opened.total > threshold) {
    return {
      kind: 'pause_failure_threshold',
      failures: opened.failures,
      openedTargets: opened.total,
      thresholdPercent: threshold,
      batch: d.currentBatch,
    };
  }
  if (activeAll === 0)
    return {
      kind: 'complete',
      status:
        ownAll === 0 && supersededAll > 0 ? 'superseded' : failuresAll > 0 ? 'completed_with_failures' : 'completed',
      failures: failuresAll,
    };
  const batches = d.rollout?.batches;
  if (batches && d.currentBatch < batches.length - 1) {
    const denominator = opened.total - Math.min(d.failuresAcknowledged, opened.failures);
    const successPercent = denominator <= 0 ? 100 : (opened.succeeded * 100) / denominator;
    if (successPercent >= (d.rollout?.min_batch_success_percent ?? 0)) {
      const next = d.currentBatch + 1;
      return { kind: 'open_batch', batch: next, percent: batches[next]! };
    }
    if (opened.active === 0)
      return {
        kind: 'pause_batch_below_minimum',
        succeeded: opened.succeeded,
        openedTargets: opened.total,
        batch: d.currentBatch,
      };
  }
  return { kind: 'none' };
}

/**
 * What resuming a paused deployment writes: it runs again (or waits for its start time if it
 * never started), and after a `batch_success_below_minimum` pause the next batch opens (a person
 * decided to go on).
 */
export function planResume(
  d: Pick<DeploymentRecord, 'rollout' | 'pausedReason' | 'currentBatch' | 'scheduledAt' | 'startedAt'>,
  now: Date,
): { status: Extract<DeploymentStatus, 'scheduled' | 'running'>; currentBatch: number; startedAt: Date | null } {
  const batchCount = d.rollout?.batches.length ?? 1;
  const currentBatch =
    d.pausedReason === 'batch_success_below_minimum' ? Math.min(d.currentBatch + 1, batchCount - 1) : d.currentBatch;
  const status = d.scheduledAt && !d.startedAt && d.scheduledAt.getTime() > now.getTime() ? 'scheduled' : 'running';
  return { status, currentBatch, startedAt: d.startedAt ?? (status === 'running' ? now : null) };
}

/**
 * Share (0-100, one decimal) of a deployment's targets that installed its version (`succeeded`,
 * health-gate failures included: they run it). Failed, timed-out, rolled-back and cancelled
 * updates ended without installing it, so a deployment with failures stays below 100 (issue 27:
 * "completed 100 %" must mean every device got the version). Targets a newer deployment took
 * over (superseded) are no longer this deployment's: they count neither as installed nor as
 * left to do; when every target was superseded nothing was installed (0). A deployment without
 * any target has nothing to install (100).
 */
export function progressPercent(d: { targetCount: number; counts: DeploymentCounts }): number {
  if (d.targetCount <= 0) return 100;
  const own = d.targetCount - d.counts.superseded;
  if (own <= 0) return 0;
  return Math.min(100, Math.round((d.counts.succeeded / own) * 1000) / 10);
}
