import type { Knex } from 'knex';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError } from '../shared/errors';
import { newId } from '../shared/ids';
import { versionKey } from '../shared/version';
import { appendEvents } from '../events/outbox';
import type { DeploymentRecord } from './deployment-types';
import { fileMissing, type DeploymentArea } from './deployment-inputs';
import { evaluateDeployment } from './deployment-progress';
import { planQueuedPaths } from './upgrade-paths';
import { findNamedDeployment } from './deployment-queries';
import { lockAccount } from '../shared/store/account-lock.store';
import { insertDeployment, updateDeployment } from './store/deployments.store';
import {
  changedDevicesOf,
  insertExplicitTargets,
  retryTargetsOf,
  supersedeQueuedOfDevices,
  type ExplicitTarget,
} from './store/targets.store';
import { firmwareVersionsWithKeys, requireSignedFirmware, storageKeyOf } from '../firmware/firmware-records';

// Deployments made from another one (kind `retry` or `rollback`): a child whose explicit targets
// come from the parent's per-device outcomes. Each answers the child's id.

/** What a follow-up deploys: one version record for the deployment, and each device's target. */
interface FollowUpPlan {
  firmwareVersionId: string;
  targetVersion: string;
  targets: ExplicitTarget[];
}

/**
 * The sequence both follow-ups share: the account lock (claims and deploys of the account wait),
 * the parent read with the caller's permissions, the plan, its versions signed when the account
 * has a signing key (422 firmware_unsigned), the child inserted; the engine hears
 * of the child and of the older deployments it superseded after the commit.
 */
async function createFollowUp(
  { deps, engine }: Pick<DeploymentArea, 'deps' | 'engine'>,
  actor: Actor,
  input: {
    /** The deployment followed up (the caller's own, else 404). */
    parentId: string;
    kind: 'retry' | 'rollback';
    plan: (trx: Knex.Transaction, parent: DeploymentRecord) => Promise<FollowUpPlan>;
  },
): Promise<string> {
  requireAdmin(actor);
  const id = newId();
  const older = await deps.transaction(async (trx) => {
    await lockAccount(trx, actor.accountId);
    const { deployment: parent } = await findNamedDeployment(trx, actor, input.parentId);
    const plan = await input.plan(trx, parent);
    // Every version a device would be sent, before anything is recorded.
    await requireSignedFirmware(trx, {
      accountId: actor.accountId,
      firmwareVersionIds: plan.targets.map((t) => t.firmwareVersionId),
    });
    return insertFollowUp(deps, trx, actor, { id, parent, kind: input.kind, ...plan });
  });
  for (const other of older) engine.deploymentChanged(other);
  engine.deploymentChanged(id);
  return id;
}

/**
 * A new deployment (kind `retry`) of the same version to the devices whose update failed or timed
 * out. 422 firmware_unsigned when the account has a signing key and that version has no signature.
 */
export function retryFailedUpdates(
  area: Pick<DeploymentArea, 'deps' | 'engine'>,
  actor: Actor,
  input: { id: string },
): Promise<string> {
  return createFollowUp(area, actor, {
    parentId: input.id,
    kind: 'retry',
    plan: async (trx, parent) => {
      const targets = await retryTargetsOf(trx, parent.id);
      if (targets.length === 0)
        throw new DomainError('invalid_state', 'No device of this deployment failed or timed out.');
      if (!(await storageKeyOf(trx, parent.firmwareVersionId))) throw fileMissing([parent.targetVersion]);
      return { firmwareVersionId: parent.firmwareVersionId, targetVersion: parent.targetVersion, targets };
    },
  });
}

/**
 * A new deployment (kind `rollback`) returning each device this one changed (succeeded) to the
 * version that device had before. 422 firmware_file_missing when a previous version's binary
 * was deleted (or never existed here), 422 firmware_unsigned when the account has a signing key
 * and a previous version has no signature; devices that had no known version are left out.
 */
export function rollBackDeployment(
  area: Pick<DeploymentArea, 'deps' | 'engine'>,
  actor: Actor,
  input: { id: string },
): Promise<string> {
  return createFollowUp(area, actor, {
    parentId: input.id,
    kind: 'rollback',
    plan: async (trx, parent) => {
      const changed = await changedDevicesOf(trx, parent.id);
      if (changed.length === 0)
        throw new DomainError('invalid_state', 'This deployment changed no device that had a known previous version.');
      const keys = [...new Set(changed.map((c) => versionKey(c.previousVersion)))];
      const versions = await firmwareVersionsWithKeys(trx, {
        accountId: actor.accountId,
        modelId: parent.modelId,
        versionKeys: keys,
      });
      const byKey = new Map(versions.map((v) => [v.versionKey, v]));
      const missing = [
        ...new Set(
          changed.filter((c) => !byKey.get(versionKey(c.previousVersion))?.storageKey).map((c) => c.previousVersion),
        ),
      ];
      if (missing.length > 0) throw fileMissing(missing);
      const targets = changed.map((c) => {
        const v = byKey.get(versionKey(c.previousVersion))!;
        return { deviceId: c.deviceId, firmwareVersionId: v.id, targetVersion: v.version, fromVersion: c.firmware };
      });
      const distinct = [...new Set(targets.map((t) => t.targetVersion))];
      return {
        firmwareVersionId: targets[0]!.firmwareVersionId,
        // Each device returns to its own version; with several, the record says so.
        targetVersion: distinct.length === 1 ? distinct[0]! : 'per-device',
        targets,
      };
    },
  });
}

/** The child deployment and its explicit targets; answers the older deployments it superseded. */
async function insertFollowUp(
  deps: DeploymentArea['deps'],
  trx: Knex.Transaction,
  actor: Actor,
  input: {
    id: string;
    parent: DeploymentRecord;
    kind: 'retry' | 'rollback';
    firmwareVersionId: string;
    targetVersion: string;
    targets: ExplicitTarget[];
  },
): Promise<string[]> {
  const now = deps.clock.now();
  await insertDeployment(trx, {
    id: input.id,
    accountId: actor.accountId,
    firmwareVersionId: input.firmwareVersionId,
    modelId: input.parent.modelId,
    targetVersion: input.targetVersion,
    kind: input.kind,
    parentDeploymentId: input.parent.id,
    status: 'running',
    filter: { parent_deployment_id: input.parent.id },
    rollout: null,
    respectMaintenanceWindow: input.parent.respectMaintenanceWindow,
    createdBy: actor.principal,
    startedAt: now,
    createdAt: now,
    updatedAt: now,
  });
  const older = await supersedeQueuedOfDevices(trx, {
    accountId: actor.accountId,
    deviceIds: input.targets.map((t) => t.deviceId),
    deploymentId: input.id,
    now,
  });
  const count = await insertExplicitTargets(trx, {
    accountId: actor.accountId,
    deploymentId: input.id,
    now,
    targets: input.targets,
  });
  await updateDeployment(trx, { id: input.id, change: { targetCount: count } });
  // Each device returns (or retries) from the version it runs now, through a path where needed.
  await planQueuedPaths(trx, deps.clock, {
    deploymentId: input.id,
    accountId: actor.accountId,
    modelId: input.parent.modelId,
  });
  await appendEvents(trx, deps.clock, [
    {
      accountId: actor.accountId,
      type: 'deployment.created',
      subject: input.id,
      data: {
        deployment_id: input.id,
        kind: input.kind,
        parent_deployment_id: input.parent.id,
        target_version: input.targetVersion,
        target_count: count,
      },
    },
  ]);
  await evaluateDeployment(trx, deps.clock, input.id);
  // Older deployments are re-evaluated after the commit (see recordDeployment).
  return older;
}
