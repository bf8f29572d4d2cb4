import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import type { Actor } from '../shared/actor';
import type { ClaimFirmwareScheduler, ClaimSchedule } from '../devices/claim-firmware';
import type { ModelService } from '../models/model.service';
import type { Deployment, DeviceUpdateView } from './deployment-types';
import type {
  DeployInput,
  DeploymentArea,
  DeploymentChangeListener,
  ListDeploymentDevicesInput,
  ListDeploymentsInput,
} from './deployment-inputs';
import { previewDeploy } from './deploy-targets';
import { cancelDeployment, pauseDeployment, recordDeployment, resumeDeployment } from './deployment-commands';
import { deploymentDevicesPage, getDeployment, listDeploymentsPage } from './deployment-queries';
import { retryFailedUpdates, rollBackDeployment } from './follow-up-deployments';
import { claimFirmwareVersion, scheduleClaimDeployment } from './claim-deployments';

export {
  DeployInput,
  ListDeploymentDevicesInput,
  ListDeploymentsInput,
  type DeploymentChangeListener,
} from './deployment-inputs';

/**
 * Deployments: recording them and their per-device targets, reading them, and the operator's
 * actions. The OTA engine (ota-engine.ts) moves them; both only trust the database rows. The
 * work lives by concept beside this file: deploy-targets.ts (what a request targets),
 * deployment-commands.ts, deployment-queries.ts, follow-up-deployments.ts (retry, rollback) and
 * claim-deployments.ts. A command answers the deployment as read after its commit.
 */
export class DeploymentService implements ClaimFirmwareScheduler {
  private readonly area: DeploymentArea;

  constructor(
    deps: ServiceDeps,
    area: { models: ModelService; engine: DeploymentChangeListener; deltas?: DeploymentArea['deltas'] },
  ) {
    this.area = { deps, ...area };
  }

  /** Dry run: what `deploy` would target now; writes nothing. */
  preview(actor: Actor, raw: DeployInput): ReturnType<typeof previewDeploy> {
    return previewDeploy(this.area, actor, raw);
  }

  /** Records the deployment and every target (`queued`) in one transaction; 202 semantics. */
  async deploy(actor: Actor, raw: DeployInput): Promise<Deployment> {
    const id = await recordDeployment(this.area, actor, raw);
    return this.get(actor, { id });
  }

  get(actor: Actor, input: { id: string }): Promise<Deployment> {
    return getDeployment(this.area.deps, actor, input);
  }

  /** Newest first, keyset paged. */
  list(
    actor: Actor,
    raw: ListDeploymentsInput,
  ): Promise<{ deployments: Deployment[]; cursors: string[]; nextCursor: string | null }> {
    return listDeploymentsPage(this.area.deps, actor, raw);
  }

  /** The per-device states of a deployment, by serial, paged; `state=superseded` lists the ones taken over. */
  devices(
    actor: Actor,
    input: { id: string } & ListDeploymentDevicesInput,
  ): Promise<{ devices: DeviceUpdateView[]; cursors: string[]; nextCursor: string | null }> {
    return deploymentDevicesPage(this.area.deps.knex, actor, input, this.area.deps.clock.now());
  }

  /** Queued updates are cancelled (devices stay where they are); sent ones finish. */
  async cancel(actor: Actor, input: { id: string }): Promise<Deployment> {
    await cancelDeployment(this.area, actor, input);
    return this.get(actor, input);
  }

  async pause(actor: Actor, input: { id: string }): Promise<Deployment> {
    await pauseDeployment(this.area, actor, input);
    return this.get(actor, input);
  }

  /**
   * Resumes a paused deployment. Failures so far are acknowledged (the threshold counts only new
   * ones); after a `batch_success_below_minimum` pause the next batch opens.
   */
  async resume(actor: Actor, input: { id: string }): Promise<Deployment> {
    await resumeDeployment(this.area, actor, input);
    return this.get(actor, input);
  }

  /** A new deployment (kind `retry`) of the same version to the devices whose update failed or timed out. */
  async retryFailed(actor: Actor, input: { id: string }): Promise<Deployment> {
    const id = await retryFailedUpdates(this.area, actor, input);
    return this.get(actor, { id });
  }

  /**
   * A new deployment (kind `rollback`) returning each device this one changed (succeeded) to the
   * version that device had before. 422 firmware_file_missing when a previous version's binary
   * was deleted (or never existed here), 422 firmware_unsigned when the account has a signing key
   * and a previous version has no signature; devices that had no known version are left out.
   */
  async rollback(actor: Actor, input: { id: string }): Promise<Deployment> {
    const id = await rollBackDeployment(this.area, actor, input);
    return this.get(actor, { id });
  }

  // ---- ClaimFirmwareScheduler: the claim's firmware goes through this engine.

  resolveVersion(
    trx: Knex.Transaction,
    input: { accountId: string; modelId: string; version: string },
  ): Promise<{ id: string } | null> {
    return claimFirmwareVersion(trx, input);
  }

  scheduleForClaim(trx: Knex.Transaction, input: ClaimSchedule): Promise<{ deploymentId: string } | null> {
    return scheduleClaimDeployment(this.area, trx, input);
  }
}
