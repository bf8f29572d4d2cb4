import type { Knex } from 'knex';
import type { ClaimSchedule } from '../devices/claim-firmware';
import { newId } from '../shared/ids';
import { versionKey } from '../shared/version';
import { appendEvents } from '../events/outbox';
import type { DeploymentArea } from './deployment-inputs';
import { insertDeployment, updateDeployment } from './store/deployments.store';
import { insertExplicitTargets } from './store/targets.store';
import { firmwareIdWithKey, firmwareVersionText, requireSignedFirmware } from '../firmware/firmware-records';

// A claim's firmware goes through the OTA engine as a deployment of kind `claim`.

/**
 * The account's firmware version of the model with that version, or null. 422 firmware_unsigned
 * when the account has a signing key and that version has none: the claim would schedule it for
 * its devices, so the claim is refused before it writes anything.
 */
export async function claimFirmwareVersion(
  trx: Knex.Transaction,
  input: { accountId: string; modelId: string; version: string },
): Promise<{ id: string } | null> {
  const id = await firmwareIdWithKey(trx, {
    accountId: input.accountId,
    modelId: input.modelId,
    versionKey: versionKey(input.version),
  });
  if (id === null) return null;
  await requireSignedFirmware(trx, { accountId: input.accountId, firmwareVersionIds: [id] });
  return { id };
}

/** A `claim` deployment of the claim's firmware to the claimed devices, in the claim's transaction. */
export async function scheduleClaimDeployment(
  { deps }: Pick<DeploymentArea, 'deps'>,
  trx: Knex.Transaction,
  input: ClaimSchedule,
): Promise<{ deploymentId: string } | null> {
  if (input.devices.length === 0) return null;
  const version = await firmwareVersionText(trx, { accountId: input.actor.accountId, id: input.firmwareVersionId });
  if (version === null) return null;
  const id = newId();
  const now = deps.clock.now();
  await insertDeployment(trx, {
    id,
    accountId: input.actor.accountId,
    firmwareVersionId: input.firmwareVersionId,
    modelId: input.modelId,
    targetVersion: version,
    kind: 'claim',
    status: 'running',
    filter: { serials: input.devices.map((d) => d.serial) },
    rollout: null,
    respectMaintenanceWindow: false,
    createdBy: input.actor.principal,
    startedAt: now,
    createdAt: now,
    updatedAt: now,
  });
  const count = await insertExplicitTargets(trx, {
    accountId: input.actor.accountId,
    deploymentId: id,
    now,
    targets: input.devices.map((d) => ({
      deviceId: d.id,
      firmwareVersionId: input.firmwareVersionId,
      targetVersion: version,
      fromVersion: null,
    })),
  });
  await updateDeployment(trx, { id, change: { targetCount: count } });
  await appendEvents(trx, deps.clock, [
    {
      accountId: input.actor.accountId,
      type: 'deployment.created',
      subject: id,
      data: { deployment_id: id, kind: 'claim', target_version: version, target_count: count },
    },
  ]);
  // Claimed devices are offline until they connect; the engine sends on their first connection.
  return { deploymentId: id };
}
