import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import { appendEvents } from '../../events/outbox';
import { tallyByBatch, parseRollout, type DeploymentRow } from './deployment.repository';

export type EvaluationOutcome = 'none' | 'batch_opened' | 'paused' | 'completed' | 'started';

/**
 * Moves a deployment along from what its device_updates rows say (the only truth, so any
 * process may evaluate; the deployment row is locked while it does). docs/ota.md "Staged rollout":
 * - failures (failed, timed_out, rolled_back, health-gate) beyond the acknowledged ones, as a
 *   share of the opened targets, above `failure_threshold_percent` pause it (`failure_threshold`);
 * - nothing left queued or in flight: `completed`, or `completed_with_failures` if any failed;
 * - the next batch opens when the opened targets' success share (acknowledged failures left
 *   out) reaches `min_batch_success_percent`; when every opened target finished below it, the
 *   deployment pauses (`batch_success_below_minimum`) for a person to decide.
 * Must run inside a transaction.
 */
export async function evaluateDeployment(trx: Knex.Transaction, clock: Clock, deploymentId: string): Promise<EvaluationOutcome> {
  const row = (await trx('deployments').where({ id: deploymentId }).forUpdate().first()) as DeploymentRow | undefined;
  if (!row) return 'none';
  const now = clock.now();
  if (row.status === 'scheduled') {
    if (row.scheduled_at && new Date(row.scheduled_at).getTime() <= now.getTime()) {
      await trx('deployments').where({ id: row.id }).update({ status: 'running', started_at: now, updated_at: now });
      await appendEvents(trx, clock, [{ accountId: row.account_id, type: 'deployment.updated', subject: row.id, data: { deployment_id: row.id, status: 'running', change: 'started' } }]);
      return 'started';
    }
    return 'none';
  }
  if (row.status !== 'running' && row.status !== 'cancelled') return 'none';
  const tallies = await tallyByBatch(trx, row.id);
  let activeAll = 0;
  let failuresAll = 0;
  let opened = { total: 0, active: 0, succeeded: 0, failures: 0 };
  for (const [batch, t] of tallies) {
    activeAll += t.active;
    failuresAll += t.failures;
    if (batch <= row.current_batch) opened = { total: opened.total + t.total, active: opened.active + t.active, succeeded: opened.succeeded + t.succeeded, failures: opened.failures + t.failures };
  }
  if (row.status === 'cancelled') {
    // Sent updates of a cancelled deployment still finish; it is finished when they did.
    if (activeAll === 0 && row.finished_at === null) await trx('deployments').where({ id: row.id }).update({ finished_at: now, updated_at: now });
    return 'none';
  }
  const rollout = parseRollout(row.rollout);
  const threshold = rollout?.failure_threshold_percent;
  const newFailures = Math.max(0, opened.failures - row.failures_acknowledged);
  if (threshold !== undefined && opened.total > 0 && (newFailures * 100) / opened.total > threshold) {
    await trx('deployments').where({ id: row.id }).update({ status: 'paused', paused_reason: 'failure_threshold', updated_at: now });
    await appendEvents(trx, clock, [
      {
        accountId: row.account_id,
        type: 'deployment.paused',
        subject: row.id,
        data: { deployment_id: row.id, reason: 'failure_threshold', failures: opened.failures, opened_targets: opened.total, failure_threshold_percent: threshold, batch: row.current_batch },
      },
    ]);
    return 'paused';
  }
  if (activeAll === 0) {
    const status = failuresAll > 0 ? 'completed_with_failures' : 'completed';
    await trx('deployments').where({ id: row.id }).update({ status, finished_at: now, updated_at: now });
    await appendEvents(trx, clock, [{ accountId: row.account_id, type: 'deployment.completed', subject: row.id, data: { deployment_id: row.id, status, failures: failuresAll, target_count: row.target_count } }]);
    return 'completed';
  }
  const batchCount = rollout?.batches.length ?? 1;
  if (row.current_batch < batchCount - 1) {
    const denominator = opened.total - Math.min(row.failures_acknowledged, opened.failures);
    const successPercent = denominator <= 0 ? 100 : (opened.succeeded * 100) / denominator;
    if (successPercent >= (rollout?.min_batch_success_percent ?? 0)) {
      const next = row.current_batch + 1;
      await trx('deployments').where({ id: row.id }).update({ current_batch: next, updated_at: now });
      await appendEvents(trx, clock, [{ accountId: row.account_id, type: 'deployment.updated', subject: row.id, data: { deployment_id: row.id, status: 'running', change: 'batch_opened', batch: next, percent: rollout!.batches[next] } }]);
      return 'batch_opened';
    }
    if (opened.active === 0) {
      await trx('deployments').where({ id: row.id }).update({ status: 'paused', paused_reason: 'batch_success_below_minimum', updated_at: now });
      await appendEvents(trx, clock, [
        {
          accountId: row.account_id,
          type: 'deployment.paused',
          subject: row.id,
          data: { deployment_id: row.id, reason: 'batch_success_below_minimum', succeeded: opened.succeeded, opened_targets: opened.total, batch: row.current_batch },
        },
      ]);
      return 'paused';
    }
  }
  return 'none';
}
