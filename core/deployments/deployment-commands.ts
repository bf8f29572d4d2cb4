import type { Knex } from 'knex';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { isUuid, newId } from '../shared/ids';
import { appendEvents } from '../events/outbox';
import type { NewEvent } from '../events/event-types';
import { DEPLOYMENT_ACTIONS, toRollout, type DeploymentRecord } from './deployment-types';
import { DeployInput, type DeploymentArea } from './deployment-inputs';
import { evaluateDeployment } from './deployment-progress';
import { planResume } from './progress-rules';
import { resolveDeployTargets } from './deploy-targets';
import { lockAccount } from '../shared/store/account-lock.store';
import { countFailures, insertDeployment, lockAccountDeployment, updateDeployment } from './store/deployments.store';
import { insertTargets, supersedeQueued } from './store/targets.store';
import { cancelQueuedOfDeployment } from './store/device-updates.store';
import { planQueuedPaths } from './upgrade-paths';

// The operator's commands on deployments: deploy, then cancel, pause and resume. Each writes in
// one transaction with its events; the service reads the deployment back.

/** Records the deployment and every target (`queued`) in one transaction; 202 semantics. Answers its id. */
export async function recordDeployment(area: DeploymentArea, actor: Actor, raw: DeployInput): Promise<string> {
  const { deps, models, engine } = area;
  requireAdmin(actor);
  const input = DeployInput.parse(raw);
  const rollout = input.rollout ? toRollout(input.rollout) : null;
  const id = newId();
  const touched = await deps.transaction(async (trx) => {
    // One deployment per account at a time: concurrent deploys over the same devices serialize,
    // so the later one deterministically supersedes the earlier one's queued updates.
    await lockAccount(trx, actor.accountId);
    const { query, firmware, filter } = await resolveDeployTargets(trx, { actor, input, models });
    const now = deps.clock.now();
    const scheduledAt = input.scheduledAt ? new Date(input.scheduledAt) : null;
    const future = scheduledAt !== null && scheduledAt.getTime() > now.getTime();
    await insertDeployment(trx, {
      id,
      accountId: actor.accountId,
      firmwareVersionId: firmware.id,
      modelId: firmware.modelId,
      targetVersion: firmware.version,
      kind: 'deploy',
      status: future ? 'scheduled' : 'running',
      filter,
      rollout,
      respectMaintenanceWindow: input.respectMaintenanceWindow,
      createdBy: actor.principal,
      scheduledAt,
      startedAt: future ? null : now,
      createdAt: now,
      updatedAt: now,
    });
    const older = await supersedeQueued(trx, { query, deploymentId: id, now });
    const count = await insertTargets(trx, {
      query,
      deploymentId: id,
      firmwareVersionId: firmware.id,
      batches: rollout?.batches ?? [100],
      now,
    });
    await updateDeployment(trx, { id, change: { targetCount: count } });
    // Devices the target does not allow directly start an upgrade path, or are left alone (no_upgrade_path).
    await planQueuedPaths(trx, deps.clock, { deploymentId: id, accountId: actor.accountId, modelId: firmware.modelId });
    await appendEvents(trx, deps.clock, [
      {
        accountId: actor.accountId,
        type: 'deployment.created',
        subject: id,
        data: {
          deployment_id: id,
          kind: 'deploy',
          model: firmware.model,
          target_version: firmware.version,
          target_count: count,
        },
      },
    ]);
    // Older deployments whose updates were superseded are re-evaluated after the commit (by the
    // engine): locking their rows here, while holding their update rows, could deadlock with a
    // concurrent cancel that takes the same locks the other way round.
    await evaluateDeployment(trx, deps.clock, id);
    return older;
  });
  for (const other of touched) engine.deploymentChanged(other);
  engine.deploymentChanged(id);
  return id;
}

/** Queued updates are cancelled (devices stay where they are); sent ones finish. */
export async function cancelDeployment(
  { deps }: Pick<DeploymentArea, 'deps'>,
  actor: Actor,
  input: { id: string },
): Promise<void> {
  requireAdmin(actor);
  await deps.transaction(async (trx) => {
    const row = await lockDeployment(trx, actor, input.id, 'cancel');
    const now = deps.clock.now();
    await cancelQueuedOfDeployment(trx, { deploymentId: row.id, now });
    await updateDeployment(trx, { id: row.id, change: { status: 'cancelled', pausedReason: null, updatedAt: now } });
    await appendEvents(trx, deps.clock, [
      commandEvent(actor, row.id, 'deployment.updated', { status: 'cancelled', change: 'cancelled' }),
    ]);
    await evaluateDeployment(trx, deps.clock, row.id);
  });
}

export async function pauseDeployment(
  { deps }: Pick<DeploymentArea, 'deps'>,
  actor: Actor,
  input: { id: string },
): Promise<void> {
  requireAdmin(actor);
  await deps.transaction(async (trx) => {
    const row = await lockDeployment(trx, actor, input.id, 'pause');
    await updateDeployment(trx, {
      id: row.id,
      change: { status: 'paused', pausedReason: 'paused_by_user', updatedAt: deps.clock.now() },
    });
    await appendEvents(trx, deps.clock, [
      commandEvent(actor, row.id, 'deployment.paused', { reason: 'paused_by_user' }),
    ]);
  });
}

/**
 * Resumes a paused deployment. Failures so far are acknowledged (the threshold counts only new
 * ones); after a `batch_success_below_minimum` pause the next batch opens.
 */
export async function resumeDeployment(
  { deps, engine }: Pick<DeploymentArea, 'deps' | 'engine'>,
  actor: Actor,
  input: { id: string },
): Promise<void> {
  requireAdmin(actor);
  await deps.transaction(async (trx) => {
    const row = await lockDeployment(trx, actor, input.id, 'resume');
    const failures = await countFailures(trx, row.id);
    const now = deps.clock.now();
    const plan = planResume(row, now);
    const { status } = plan;
    await updateDeployment(trx, {
      id: row.id,
      change: {
        status,
        pausedReason: null,
        failuresAcknowledged: failures,
        currentBatch: plan.currentBatch,
        startedAt: plan.startedAt,
        updatedAt: now,
      },
    });
    await appendEvents(trx, deps.clock, [
      commandEvent(actor, row.id, 'deployment.updated', { status, change: 'resumed' }),
    ]);
    await evaluateDeployment(trx, deps.clock, row.id);
  });
  engine.deploymentChanged(input.id);
}

/** The event of an operator's command on a deployment: which deployment, what changed, and by whom. */
function commandEvent(
  actor: Actor,
  deploymentId: string,
  type: 'deployment.updated' | 'deployment.paused',
  change: Record<string, unknown>,
): NewEvent {
  return {
    accountId: actor.accountId,
    type,
    subject: deploymentId,
    data: { deployment_id: deploymentId, ...change, by: actor.principal },
  };
}

/** Locks the caller's deployment for `action`; invalid_state when its status does not allow it. */
async function lockDeployment(
  trx: Knex.Transaction,
  actor: Actor,
  id: string,
  action: keyof typeof DEPLOYMENT_ACTIONS,
): Promise<DeploymentRecord> {
  if (!isUuid(id)) throw notFound('Deployment');
  const row = await lockAccountDeployment(trx, { accountId: actor.accountId, id });
  if (!row) throw notFound('Deployment');
  if (!(DEPLOYMENT_ACTIONS[action] as readonly string[]).includes(row.status)) {
    throw new DomainError(
      'invalid_state',
      `A ${row.status} deployment cannot be ${action === 'cancel' ? 'cancelled' : action === 'pause' ? 'paused' : 'resumed'}.`,
      { details: { status: row.status } },
    );
  }
  return row;
}
