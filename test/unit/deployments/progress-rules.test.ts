import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  evaluateProgress,
  evaluationNeedsTallies,
  planResume,
  progressPercent,
  type EvaluatedDeployment,
  type ProgressDecision,
} from '#core/deployments/progress-rules';
import {
  DEPLOYMENT_STATUSES,
  Rollout,
  emptyCounts,
  type BatchTally,
  type DeploymentCounts,
} from '#core/deployments/deployment-types';

const NOW = new Date('2024-01-15T12:00:00Z');
/** A stored rollout (its snake_case form), defaults filled in. */
const rollout = (stored: z.input<typeof Rollout>) => Rollout.parse(stored);

function deployment(over: Partial<EvaluatedDeployment> = {}): EvaluatedDeployment {
  return {
    status: 'running',
    scheduledAt: null,
    finishedAt: null,
    currentBatch: 0,
    failuresAcknowledged: 0,
    rollout: null,
    ...over,
  };
}

/** Tallies per batch from [total, active, succeeded, failures, superseded = 0]. */
const tallies = (...batches: Array<[number, number, number, number, number?]>) =>
  new Map<number, BatchTally>(
    batches.map(([total, active, succeeded, failures, superseded = 0], batch) => [
      batch,
      { total, active, succeeded, failures, superseded },
    ]),
  );

describe('deployment progress evaluation', () => {
  it.each<[string, Partial<EvaluatedDeployment>, ProgressDecision]>([
    [
      'scheduled, its time not come',
      { status: 'scheduled', scheduledAt: new Date('2024-01-15T12:00:01Z') },
      { kind: 'none' },
    ],
    ['scheduled, its time is now', { status: 'scheduled', scheduledAt: NOW }, { kind: 'start' }],
    [
      'scheduled, its time passed',
      { status: 'scheduled', scheduledAt: new Date('2024-01-15T11:00:00Z') },
      { kind: 'start' },
    ],
    ['scheduled without a time', { status: 'scheduled' }, { kind: 'none' }],
  ])('%s', (_, over, decision) => {
    expect(evaluateProgress(deployment(over), new Map(), NOW)).toEqual(decision);
  });

  it.each(
    DEPLOYMENT_STATUSES.filter((s) => !evaluationNeedsTallies({ status: s, finishedAt: null }) && s !== 'scheduled'),
  )('leaves a %s deployment alone', (status) => {
    expect(evaluateProgress(deployment({ status }), tallies([10, 0, 5, 5]), NOW)).toEqual({ kind: 'none' });
  });

  it('reads no tally for a cancelled deployment that finished (an unclaim or a health failure may mark it)', () => {
    expect(evaluationNeedsTallies({ status: 'cancelled', finishedAt: null })).toBe(true);
    expect(evaluationNeedsTallies({ status: 'cancelled', finishedAt: NOW })).toBe(false);
  });

  it.each<[string, Partial<EvaluatedDeployment>, Map<number, BatchTally>, ProgressDecision]>([
    ['cancelled, sent updates still running', { status: 'cancelled' }, tallies([10, 2, 3, 0]), { kind: 'none' }],
    [
      'cancelled, every sent update ended',
      { status: 'cancelled' },
      tallies([10, 0, 3, 1]),
      { kind: 'finish_cancelled' },
    ],
    [
      'cancelled and already finished',
      { status: 'cancelled', finishedAt: NOW },
      tallies([10, 0, 3, 1]),
      { kind: 'none' },
    ],
    [
      'cancelled, a batch not opened still holds active rows',
      { status: 'cancelled', currentBatch: 0 },
      tallies([5, 0, 5, 0], [5, 1, 0, 0]),
      { kind: 'none' },
    ],
  ])('%s', (_, over, t, decision) => {
    expect(evaluateProgress(deployment(over), t, NOW)).toEqual(decision);
  });

  it.each<[string, Partial<EvaluatedDeployment>, Map<number, BatchTally>, ProgressDecision]>([
    ['every update succeeded', {}, tallies([10, 0, 10, 0]), { kind: 'complete', status: 'completed', failures: 0 }],
    [
      'every update ended, some failed',
      {},
      tallies([10, 0, 8, 2]),
      { kind: 'complete', status: 'completed_with_failures', failures: 2 },
    ],
    ['no target at all', {}, new Map(), { kind: 'complete', status: 'completed', failures: 0 }],
    // Issue 27: a claim's updates all taken over by a newer deploy installed nothing.
    [
      'every target superseded: it says so',
      {},
      tallies([0, 0, 0, 0, 3]),
      { kind: 'complete', status: 'superseded', failures: 0 },
    ],
    [
      'every target superseded, over several batches',
      { rollout: rollout({ batches: [50, 100] }) },
      tallies([0, 0, 0, 0, 2], [0, 0, 0, 0, 2]),
      { kind: 'complete', status: 'superseded', failures: 0 },
    ],
    [
      'some superseded, the rest installed: completed',
      {},
      tallies([2, 0, 2, 0, 3]),
      { kind: 'complete', status: 'completed', failures: 0 },
    ],
    [
      'some superseded, the rest failed: completed with failures',
      {},
      tallies([2, 0, 0, 2, 3]),
      { kind: 'complete', status: 'completed_with_failures', failures: 2 },
    ],
    ['some superseded, the rest still running', {}, tallies([2, 1, 1, 0, 3]), { kind: 'none' }],
    ['updates still running, no rollout', {}, tallies([10, 4, 6, 0]), { kind: 'none' }],
    [
      'failures in a batch not yet opened count for the final status',
      { rollout: rollout({ batches: [50, 100] }), currentBatch: 1 },
      tallies([5, 0, 5, 0], [5, 0, 4, 1]),
      { kind: 'complete', status: 'completed_with_failures', failures: 1 },
    ],
  ])('%s', (_, over, t, decision) => {
    expect(evaluateProgress(deployment(over), t, NOW)).toEqual(decision);
  });

  describe('failure threshold (share of the opened targets)', () => {
    const staged = rollout({ batches: [10, 100], failure_threshold_percent: 20, min_batch_success_percent: 90 });
    it.each<[string, Partial<EvaluatedDeployment>, Map<number, BatchTally>, ProgressDecision['kind']]>([
      ['at the threshold: keeps going', {}, tallies([10, 5, 3, 2], [90, 90, 0, 0]), 'none'],
      ['above it: pauses', {}, tallies([10, 5, 2, 3], [90, 90, 0, 0]), 'pause_failure_threshold'],
      [
        'above it only counting acknowledged failures: keeps going',
        { failuresAcknowledged: 2 },
        tallies([10, 5, 2, 3], [90, 90, 0, 0]),
        'none',
      ],
      [
        'pauses before completing when every update ended',
        {},
        tallies([10, 0, 7, 3], [90, 0, 90, 0]),
        'pause_failure_threshold',
      ],
      ['failures of unopened batches do not count', {}, tallies([10, 5, 5, 0], [90, 80, 0, 10]), 'none'],
      [
        'no opened target: no share to judge (the next batch opens)',
        {},
        tallies([0, 0, 0, 0], [90, 90, 0, 0]),
        'open_batch',
      ],
    ])('%s', (_, over, t, kind) => {
      expect(evaluateProgress(deployment({ rollout: staged, ...over }), t, NOW).kind).toBe(kind);
    });

    it('says what it saw', () => {
      expect(evaluateProgress(deployment({ rollout: staged }), tallies([10, 5, 2, 3], [90, 90, 0, 0]), NOW)).toEqual({
        kind: 'pause_failure_threshold',
        failures: 3,
        openedTargets: 10,
        thresholdPercent: 20,
        batch: 0,
      });
    });

    it('never pauses without a threshold', () => {
      expect(
        evaluateProgress(
          deployment({ rollout: rollout({ batches: [10, 100], min_batch_success_percent: 0 }) }),
          tallies([10, 0, 0, 10], [90, 90, 0, 0]),
          NOW,
        ),
      ).toEqual({ kind: 'open_batch', batch: 1, percent: 100 });
    });
  });

  describe('batch advance', () => {
    const staged = rollout({ batches: [10, 50, 100], min_batch_success_percent: 80 });
    it.each<[string, Partial<EvaluatedDeployment>, Map<number, BatchTally>, ProgressDecision]>([
      [
        'success share reached: the next batch opens',
        {},
        tallies([10, 2, 8, 0], [40, 40, 0, 0], [50, 50, 0, 0]),
        { kind: 'open_batch', batch: 1, percent: 50 },
      ],
      [
        'not reached, updates still running: waits',
        {},
        tallies([10, 3, 7, 0], [40, 40, 0, 0], [50, 50, 0, 0]),
        { kind: 'none' },
      ],
      [
        'not reached and every opened update ended: pauses',
        {},
        tallies([10, 0, 7, 3], [40, 40, 0, 0], [50, 50, 0, 0]),
        { kind: 'pause_batch_below_minimum', succeeded: 7, openedTargets: 10, batch: 0 },
      ],
      [
        'acknowledged failures leave the share: 7 of 9 after one acknowledged',
        { failuresAcknowledged: 1 },
        tallies([10, 0, 7, 3], [40, 40, 0, 0], [50, 50, 0, 0]),
        { kind: 'pause_batch_below_minimum', succeeded: 7, openedTargets: 10, batch: 0 },
      ],
      [
        'acknowledged failures leave the share: 7 of 8 after two acknowledged',
        { failuresAcknowledged: 2 },
        tallies([10, 0, 7, 3], [40, 40, 0, 0], [50, 50, 0, 0]),
        { kind: 'open_batch', batch: 1, percent: 50 },
      ],
      [
        'opened batches add up',
        { currentBatch: 1 },
        tallies([10, 0, 9, 1], [40, 8, 32, 0], [50, 50, 0, 0]),
        { kind: 'open_batch', batch: 2, percent: 100 },
      ],
      [
        'the last batch open: nothing left to open',
        { currentBatch: 2 },
        tallies([10, 0, 10, 0], [40, 0, 40, 0], [50, 5, 45, 0]),
        { kind: 'none' },
      ],
      [
        'no opened target left (all superseded): the next batch opens',
        {},
        tallies([0, 0, 0, 0], [40, 40, 0, 0], [50, 50, 0, 0]),
        { kind: 'open_batch', batch: 1, percent: 50 },
      ],
    ])('%s', (_, over, t, decision) => {
      expect(evaluateProgress(deployment({ rollout: staged, ...over }), t, NOW)).toEqual(decision);
    });
  });
});

describe('resuming a paused deployment', () => {
  const staged = rollout({ batches: [10, 50, 100] });
  it.each([
    [
      'paused by a person: same batch, running',
      { pausedReason: 'paused_by_user', currentBatch: 1 },
      { status: 'running', currentBatch: 1 },
    ],
    [
      'paused by the threshold: same batch',
      { pausedReason: 'failure_threshold', currentBatch: 0 },
      { status: 'running', currentBatch: 0 },
    ],
    [
      'paused below the minimum: the next batch opens',
      { pausedReason: 'batch_success_below_minimum', currentBatch: 0 },
      { status: 'running', currentBatch: 1 },
    ],
    [
      'paused below the minimum in the last batch: stays there',
      { pausedReason: 'batch_success_below_minimum', currentBatch: 2 },
      { status: 'running', currentBatch: 2 },
    ],
    [
      'paused below the minimum without a rollout: batch 0',
      { pausedReason: 'batch_success_below_minimum', currentBatch: 0, rollout: null },
      { status: 'running', currentBatch: 0 },
    ],
  ] as const)('%s', (_, over, expected) => {
    const plan = planResume(
      { rollout: staged, scheduledAt: null, startedAt: new Date('2024-01-15T10:00:00Z'), ...over },
      NOW,
    );
    expect(plan).toEqual({ ...expected, startedAt: new Date('2024-01-15T10:00:00Z') });
  });

  it.each([
    [
      'paused before its start time: scheduled again, not started',
      new Date('2024-01-16T00:00:00Z'),
      null,
      { status: 'scheduled', startedAt: null },
    ],
    [
      'paused before starting, its time passed: runs from now',
      new Date('2024-01-15T11:00:00Z'),
      null,
      { status: 'running', startedAt: NOW },
    ],
    [
      'started already: keeps its start',
      new Date('2024-01-16T00:00:00Z'),
      new Date('2024-01-15T09:00:00Z'),
      { status: 'running', startedAt: new Date('2024-01-15T09:00:00Z') },
    ],
  ] as const)('%s', (_, scheduledAt, startedAt, expected) => {
    expect(
      planResume({ rollout: null, pausedReason: 'paused_by_user', currentBatch: 0, scheduledAt, startedAt }, NOW),
    ).toEqual({ ...expected, currentBatch: 0 });
  });
});

describe('deployment progress percent', () => {
  const counts = (c: Partial<DeploymentCounts>): DeploymentCounts => ({ ...emptyCounts(), ...c });
  it.each<[string, number, Partial<DeploymentCounts>, number]>([
    ['nothing done yet', 10, { queued: 10 }, 0],
    ['in flight is not done', 10, { sent: 2, downloading: 2, installing: 2, rebooting: 2, queued: 2 }, 0],
    // Issue 27: only devices that installed the version count; failures end without installing it.
    [
      'only installed ones count, not other final states',
      10,
      { succeeded: 2, failed: 2, timed_out: 2, cancelled: 2, rolled_back: 2 },
      20,
    ],
    ['every update failed', 4, { failed: 3, timed_out: 1 }, 0],
    ['every update installed', 4, { succeeded: 4 }, 100],
    ['one decimal', 3, { succeeded: 1, queued: 2 }, 33.3],
    ['rounded', 3, { succeeded: 2, queued: 1 }, 66.7],
    ['health-gate failures are succeeded updates, counted once', 4, { succeeded: 2, health_failed: 2, queued: 2 }, 50],
    // Superseded targets are another deployment's now: neither done nor left to do.
    ['superseded ones leave the count', 10, { superseded: 5, succeeded: 0, queued: 5 }, 0],
    ['the rest done: complete', 10, { superseded: 5, succeeded: 5 }, 100],
    ['half of the rest done', 10, { superseded: 6, succeeded: 2, queued: 2 }, 50],
    ['every target superseded: nothing installed', 4, { superseded: 4 }, 0],
    ['no target', 0, {}, 100],
  ])('%s: %s targets, %j -> %s %%', (_, targetCount, c, percent) => {
    expect(progressPercent({ targetCount, counts: counts(c) })).toBe(percent);
  });

  it('never passes 100 when the counts outgrow the target count', () => {
    expect(progressPercent({ targetCount: 2, counts: counts({ succeeded: 3 }) })).toBe(100);
  });
});
