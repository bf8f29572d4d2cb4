import type { z } from 'zod';
import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { isUuid, newId } from '../shared/ids';
import { requireVersion, versionKey } from '../shared/version';
import { appendEvents } from '../../events/outbox';
import { isValidSerial } from '../devices/device-types';
import type { ClaimFirmwareScheduler } from '../devices/claim-firmware';
import type { ModelService } from '../models/model.service';
import {
  DEPLOYMENT_ACTIONS,
  RolloutInput,
  toDeployment,
  type Deployment,
  type DeploymentFilter,
  type DeploymentRecord,
  type DeviceUpdateView,
} from './deployment-types';
import {
  DeployInput,
  ListDeploymentDevicesInput,
  ListDeploymentsInput,
  cursorCodec,
  fileMissing,
  versionNotFound,
  type DeploymentChangeListener,
} from './deployment-inputs';

export {
  DeployInput,
  ListDeploymentDevicesInput,
  ListDeploymentsInput,
  type DeploymentChangeListener,
} from './deployment-inputs';
import { evaluateDeployment } from './deployment-progress';
import { planResume } from './progress-rules';
import { lockAccount } from '../shared/store/account-lock.store';
import {
  countFailures,
  countsFor,
  findDeployment,
  insertDeployment,
  listDeployments,
  lockAccountDeployment,
  updateDeployment,
  type NamedDeployment,
} from './store/deployments.store';
import {
  changedDevicesOf,
  insertExplicitTargets,
  insertTargets,
  previewTargets,
  retryTargetsOf,
  supersedeQueued,
  supersedeQueuedOfDevices,
  type ExplicitTarget,
  type TargetQuery,
} from './store/targets.store';
import { cancelQueuedOfDeployment, listDeploymentUpdates } from './store/device-updates.store';
import {
  firmwareIdWithKey,
  firmwareRefsWithKey,
  firmwareVersionText,
  firmwareVersionsWithKeys,
  storageKeyOf,
  type FirmwareRef,
} from '../firmware/store/firmware-versions.store';

/**
 * Deployments: recording them and their per-device targets, reading them, and the operator's
 * actions. The OTA engine (ota-engine.ts) moves them; both only trust the database rows.
 */
export class DeploymentService implements ClaimFirmwareScheduler {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: { models: ModelService; engine: DeploymentChangeListener },
  ) {}

  /** Dry run: what `deploy` would target now; writes nothing. */
  async preview(
    actor: Actor,
    raw: DeployInput,
  ): Promise<{ targetCount: number; sampleSerials: string[]; model: string; targetVersion: string }> {
    const input = DeployInput.parse(raw);
    const { query, firmware } = await this.resolve(this.deps.knex, actor, input);
    const { count, sample } = await previewTargets(this.deps.knex, { query, sample: 10 });
    return { targetCount: count, sampleSerials: sample, model: firmware.model, targetVersion: firmware.version };
  }

  /** Records the deployment and every target (`queued`) in one transaction; 202 semantics. */
  async deploy(actor: Actor, raw: DeployInput): Promise<Deployment> {
    requireAdmin(actor);
    const input = DeployInput.parse(raw);
    if (input.dry_run) throw new DomainError('bad_request', 'Use preview for a dry run.');
    const rollout = input.rollout ? RolloutInput.parse(input.rollout) : null;
    const id = newId();
    const touched = await this.deps.transaction(async (trx) => {
      // One deployment per account at a time: concurrent deploys over the same devices serialize,
      // so the later one deterministically supersedes the earlier one's queued updates.
      await lockAccount(trx, actor.accountId);
      const { query, firmware, filter } = await this.resolve(trx, actor, input);
      const now = this.deps.clock.now();
      const scheduledAt = input.scheduled_at ? new Date(input.scheduled_at) : null;
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
        respectMaintenanceWindow: input.respect_maintenance_window,
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
      await appendEvents(trx, this.deps.clock, [
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
      await evaluateDeployment(trx, this.deps.clock, id);
      return older;
    });
    for (const other of touched) this.area.engine.deploymentChanged(other);
    this.area.engine.deploymentChanged(id);
    return this.get(actor, { id });
  }

  async get(actor: Actor, input: { id: string }): Promise<Deployment> {
    const { deployment, model } = await this.findNamed(this.deps.knex, actor, input.id);
    const counts = await countsFor(this.deps.knex, [deployment.id]);
    return toDeployment(deployment, counts.get(deployment.id)!, model);
  }

  /** Newest first, keyset paged. */
  async list(
    actor: Actor,
    raw: ListDeploymentsInput,
  ): Promise<{ deployments: Deployment[]; nextCursor: string | null }> {
    const input = ListDeploymentsInput.parse(raw);
    let before: { createdAt: string; id: string } | undefined;
    if (input.cursor) {
      const [createdAt, id] = cursorCodec.decode(input.cursor, 2) as [string, string];
      if (!isUuid(id) || Number.isNaN(Date.parse(createdAt)))
        throw new DomainError('validation_failed', 'The cursor is not one this list returned.', {
          errors: [{ field: 'cursor', message: 'is invalid' }],
        });
      before = { createdAt, id };
    }
    const rows = await listDeployments(this.deps.knex, {
      accountId: actor.accountId,
      status: input.status,
      before,
      limit: input.limit + 1,
    });
    const more = rows.length > input.limit;
    const page = more ? rows.slice(0, input.limit) : rows;
    const counts = await countsFor(
      this.deps.knex,
      page.map((r) => r.deployment.id),
    );
    const last = page[page.length - 1]?.deployment;
    return {
      deployments: page.map((r) => toDeployment(r.deployment, counts.get(r.deployment.id)!, r.model)),
      nextCursor: more && last ? cursorCodec.encode([last.createdAt.toISOString(), last.id]) : null,
    };
  }

  /** The per-device states of a deployment, by serial, paged; `state=superseded` lists the ones taken over. */
  async devices(
    actor: Actor,
    input: { id: string } & ListDeploymentDevicesInput,
  ): Promise<{ devices: DeviceUpdateView[]; nextCursor: string | null }> {
    const { id, ...rest } = input;
    const page = ListDeploymentDevicesInput.parse(rest);
    const { deployment } = await this.findNamed(this.deps.knex, actor, id);
    let afterSerial: string | undefined;
    if (page.cursor) {
      const [serial] = cursorCodec.decode(page.cursor, 1) as [string];
      if (!isValidSerial(serial))
        throw new DomainError('validation_failed', 'The cursor is not one this list returned.', {
          errors: [{ field: 'cursor', message: 'is invalid' }],
        });
      afterSerial = serial;
    }
    const rows = await listDeploymentUpdates(this.deps.knex, {
      deploymentId: deployment.id,
      state: page.state,
      afterSerial,
      limit: page.limit + 1,
    });
    const more = rows.length > page.limit;
    const items = more ? rows.slice(0, page.limit) : rows;
    return { devices: items, nextCursor: more ? cursorCodec.encode([items[items.length - 1]!.serial]) : null };
  }

  /** Queued updates are cancelled (devices stay where they are); sent ones finish. */
  async cancel(actor: Actor, input: { id: string }): Promise<Deployment> {
    requireAdmin(actor);
    await this.deps.transaction(async (trx) => {
      const row = await this.lockRow(trx, actor, input.id, 'cancel');
      const now = this.deps.clock.now();
      await cancelQueuedOfDeployment(trx, { deploymentId: row.id, now });
      await updateDeployment(trx, { id: row.id, change: { status: 'cancelled', pausedReason: null, updatedAt: now } });
      await appendEvents(trx, this.deps.clock, [
        {
          accountId: actor.accountId,
          type: 'deployment.updated',
          subject: row.id,
          data: { deployment_id: row.id, status: 'cancelled', change: 'cancelled', by: actor.principal },
        },
      ]);
      await evaluateDeployment(trx, this.deps.clock, row.id);
    });
    return this.get(actor, input);
  }

  async pause(actor: Actor, input: { id: string }): Promise<Deployment> {
    requireAdmin(actor);
    await this.deps.transaction(async (trx) => {
      const row = await this.lockRow(trx, actor, input.id, 'pause');
      await updateDeployment(trx, {
        id: row.id,
        change: { status: 'paused', pausedReason: 'paused_by_user', updatedAt: this.deps.clock.now() },
      });
      await appendEvents(trx, this.deps.clock, [
        {
          accountId: actor.accountId,
          type: 'deployment.paused',
          subject: row.id,
          data: { deployment_id: row.id, reason: 'paused_by_user', by: actor.principal },
        },
      ]);
    });
    return this.get(actor, input);
  }

  /**
   * Resumes a paused deployment. Failures so far are acknowledged (the threshold counts only new
   * ones); after a `batch_success_below_minimum` pause the next batch opens.
   */
  async resume(actor: Actor, input: { id: string }): Promise<Deployment> {
    requireAdmin(actor);
    await this.deps.transaction(async (trx) => {
      const row = await this.lockRow(trx, actor, input.id, 'resume');
      const failures = await countFailures(trx, row.id);
      const now = this.deps.clock.now();
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
      await appendEvents(trx, this.deps.clock, [
        {
          accountId: actor.accountId,
          type: 'deployment.updated',
          subject: row.id,
          data: { deployment_id: row.id, status, change: 'resumed', by: actor.principal },
        },
      ]);
      await evaluateDeployment(trx, this.deps.clock, row.id);
    });
    this.area.engine.deploymentChanged(input.id);
    return this.get(actor, input);
  }

  /** A new deployment (kind `retry`) of the same version to the devices whose update failed or timed out. */
  async retryFailed(actor: Actor, input: { id: string }): Promise<Deployment> {
    requireAdmin(actor);
    const id = newId();
    const older = await this.deps.transaction(async (trx) => {
      await lockAccount(trx, actor.accountId);
      const { deployment: parent } = await this.findNamed(trx, actor, input.id);
      const targets = await retryTargetsOf(trx, parent.id);
      if (targets.length === 0)
        throw new DomainError('invalid_state', 'No device of this deployment failed or timed out.');
      if (!(await storageKeyOf(trx, parent.firmwareVersionId))) throw fileMissing([parent.targetVersion]);
      return this.insertChild(trx, actor, {
        id,
        parent,
        kind: 'retry',
        firmwareVersionId: parent.firmwareVersionId,
        targetVersion: parent.targetVersion,
        targets,
      });
    });
    for (const other of older) this.area.engine.deploymentChanged(other);
    this.area.engine.deploymentChanged(id);
    return this.get(actor, { id });
  }

  /**
   * A new deployment (kind `rollback`) returning each device this one changed (succeeded) to the
   * version that device had before. 422 firmware_file_missing when a previous version's binary
   * was deleted (or never existed here); devices that had no known version are left out.
   */
  async rollback(actor: Actor, input: { id: string }): Promise<Deployment> {
    requireAdmin(actor);
    const id = newId();
    const older = await this.deps.transaction(async (trx) => {
      await lockAccount(trx, actor.accountId);
      const { deployment: parent } = await this.findNamed(trx, actor, input.id);
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
      return this.insertChild(trx, actor, {
        id,
        parent,
        kind: 'rollback',
        firmwareVersionId: targets[0]!.firmwareVersionId,
        // Each device returns to its own version; with several, the record says so.
        targetVersion: distinct.length === 1 ? distinct[0]! : 'per-device',
        targets,
      });
    });
    for (const other of older) this.area.engine.deploymentChanged(other);
    this.area.engine.deploymentChanged(id);
    return this.get(actor, { id });
  }

  // ---- ClaimFirmwareScheduler: the claim's firmware goes through this engine.

  async resolveVersion(
    trx: Knex.Transaction,
    input: { accountId: string; modelId: string; version: string },
  ): Promise<{ id: string } | null> {
    const id = await firmwareIdWithKey(trx, {
      accountId: input.accountId,
      modelId: input.modelId,
      versionKey: versionKey(input.version),
    });
    return id === null ? null : { id };
  }

  async scheduleForClaim(
    trx: Knex.Transaction,
    input: {
      actor: Actor;
      modelId: string;
      firmwareVersionId: string;
      version: string;
      devices: Array<{ id: string; serial: string }>;
    },
  ): Promise<{ deploymentId: string } | null> {
    if (input.devices.length === 0) return null;
    const version = await firmwareVersionText(trx, { accountId: input.actor.accountId, id: input.firmwareVersionId });
    if (version === null) return null;
    const id = newId();
    const now = this.deps.clock.now();
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
    await appendEvents(trx, this.deps.clock, [
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

  // ---- internals

  private async insertChild(
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
    const now = this.deps.clock.now();
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
    await appendEvents(trx, this.deps.clock, [
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
    await evaluateDeployment(trx, this.deps.clock, input.id);
    // Older deployments are re-evaluated after the commit (see deploy).
    return older;
  }

  private async resolve(
    db: Knex | Knex.Transaction,
    actor: Actor,
    input: z.output<typeof DeployInput>,
  ): Promise<{ query: TargetQuery; firmware: FirmwareRef; filter: DeploymentFilter }> {
    requireVersion(input.firmware_version, 'firmware_version');
    if (input.filter.firmware_lt !== undefined) requireVersion(input.filter.firmware_lt, 'filter.firmware_lt');
    const serials = input.serials ?? input.filter.serials;
    if (serials) {
      const bad = serials.map((s, i) => [s, i] as const).filter(([s]) => !isValidSerial(s));
      if (bad.length > 0) {
        throw new DomainError('invalid_serial', 'Some serials are not valid serial numbers.', {
          errors: bad.map(([, i]) => ({
            field: `${input.serials ? 'serials' : 'filter.serials'}.${i}`,
            message: 'is not a valid serial',
          })),
        });
      }
    }
    let firmware: FirmwareRef;
    const key = versionKey(input.firmware_version);
    if (input.filter.model !== undefined) {
      const model = await this.area.models.requireByName(
        actor,
        input.filter.model,
        db as Knex.Transaction,
        'filter.model',
      );
      const [found] = await firmwareRefsWithKey(db, { accountId: actor.accountId, versionKey: key, modelId: model.id });
      if (!found) throw versionNotFound(input.firmware_version, `model "${model.name}"`);
      firmware = found;
    } else {
      const rows = await firmwareRefsWithKey(db, { accountId: actor.accountId, versionKey: key });
      if (rows.length === 0) throw versionNotFound(input.firmware_version, 'any model of this account');
      if (rows.length > 1) {
        throw new DomainError(
          'validation_failed',
          `Version ${input.firmware_version} exists for several models; name one.`,
          { errors: [{ field: 'filter.model', message: 'is required: the version exists for several models' }] },
        );
      }
      firmware = rows[0]!;
    }
    if (!firmware.storageKey) throw fileMissing([firmware.version]);
    const filter: DeploymentFilter = { model: firmware.model };
    if (input.filter.firmware_lt !== undefined) filter.firmware_lt = input.filter.firmware_lt;
    if (input.filter.status !== undefined) filter.status = input.filter.status;
    if (serials) filter.serials = serials;
    return {
      query: {
        accountId: actor.accountId,
        modelId: firmware.modelId,
        targetVersion: firmware.version,
        firmwareLt: input.filter.firmware_lt,
        status: input.filter.status,
        serials,
      },
      firmware,
      filter,
    };
  }

  private async findNamed(db: Knex | Knex.Transaction, actor: Actor, id: string): Promise<NamedDeployment> {
    if (!isUuid(id)) throw notFound('Deployment');
    const found = await findDeployment(db, { accountId: actor.accountId, id });
    if (!found) throw notFound('Deployment');
    return found;
  }

  private async lockRow(
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
}
