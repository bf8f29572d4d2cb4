import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import { assertNever } from '../shared/errors';
import { appendEvents } from '../events/outbox';
import { evaluateProgress, evaluationNeedsTallies } from './progress-rules';
import { lockDeployment, tallyByBatch, updateDeployment } from './store/deployments.store';
import { keepFinishedFigures } from './deployment-figures';

export type EvaluationOutcome = 'none' | 'batch_opened' | 'paused' | 'completed' | 'started';

/**
 * Moves a deployment along from what its device_updates rows say (the only truth, so any
 * process may evaluate; the deployment row is locked while it does): progress-rules.ts decides,
 * this writes the decision and its event. Must run inside a transaction.
 */
export async function evaluateDeployment(
  trx: Knex.Transaction,
  clock: Clock,
  deploymentId: string,
): Promise<EvaluationOutcome> {
  const d = await lockDeployment(trx, deploymentId);
  if (!d) return 'none';
  const now = clock.now();
  const tallies = evaluationNeedsTallies(d) ? await tallyByBatch(trx, d.id) : new Map();
  const decision = evaluateProgress(d, tallies, now);
  switch (decision.kind) {
    case 'none':
      return 'none';
    case 'start':
      await updateDeployment(trx, { id: d.id, change: { status: 'running', startedAt: now, updatedAt: now } });
      await appendEvents(trx, clock, [
        {
          accountId: d.accountId,
          type: 'deployment.updated',
          subject: d.id,
          data: { deployment_id: d.id, status: 'running', change: 'started' },
        },
      ]);
      return 'started';
    case 'finish_cancelled':
      await updateDeployment(trx, { id: d.id, change: { finishedAt: now, updatedAt: now } });
      await keepFinishedFigures(trx, d.id, now);
      return 'none';
    case 'pause_failure_threshold':
      await updateDeployment(trx, {
        id: d.id,
        change: { status: 'paused', pausedReason: 'failure_threshold', updatedAt: now },
      });
      await appendEvents(trx, clock, [
        {
          accountId: d.accountId,
          type: 'deployment.paused',
          subject: d.id,
          data: {
            deployment_id: d.id,
            reason: 'failure_threshold',
            failures: decision.failures,
            opened_targets: decision.openedTargets,
            failure_threshold_percent: decision.thresholdPercent,
            batch: decision.batch,
          },
        },
      ]);
      return 'paused';
    case 'complete':
      await updateDeployment(trx, { id: d.id, change: { status: decision.status, finishedAt: now, updatedAt: now } });
      await keepFinishedFigures(trx, d.id, now);
      await appendEvents(trx, clock, [
        {
          accountId: d.accountId,
          type: 'deployment.completed',
          subject: d.id,
          data: {
            deployment_id: d.id,
            status: decision.status,
            failures: decision.failures,
            target_count: d.targetCount,
          },
        },
      ]);
      return 'completed';
    case 'open_batch':
      await updateDeployment(trx, { id: d.id, change: { currentBatch: decision.batch, updatedAt: now } });
      await appendEvents(trx, clock, [
        {
          accountId: d.accountId,
          type: 'deployment.updated',
          subject: d.id,
          data: {
            deployment_id: d.id,
            status: 'running',
            change: 'batch_opened',
            batch: decision.batch,
            percent: decision.percent,
          },
        },
      ]);
      return 'batch_opened';
    case 'pause_batch_below_minimum':
      await updateDeployment(trx, {
        id: d.id,
        change: { status: 'paused', pausedReason: 'batch_success_below_minimum', updatedAt: now },
      });
      await appendEvents(trx, clock, [
        {
          accountId: d.accountId,
          type: 'deployment.paused',
          subject: d.id,
          data: {
            deployment_id: d.id,
            reason: 'batch_success_below_minimum',
            succeeded: decision.succeeded,
            opened_targets: decision.openedTargets,
            batch: decision.batch,
          },
        },
      ]);
      return 'paused';
    default:
      return assertNever(decision, 'progress decision');
  }
}
