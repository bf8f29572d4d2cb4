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
import { DEPLOYMENT_ACTIONS, RolloutInput, type Deployment, type DeploymentFilter, type DeviceUpdateView } from './deployment-types';
import { DeployInput, ListDeploymentDevicesInput, ListDeploymentsInput, cursorCodec, fileMissing, versionNotFound, type DeploymentChangeListener, type FirmwareRef } from './deployment-inputs';

export { DeployInput, ListDeploymentDevicesInput, ListDeploymentsInput, type DeploymentChangeListener } from './deployment-inputs';
import { countsFor, toDeployment, toUpdateView, type DeploymentRow, type UpdateRowView } from './deployment.repository';
import { insertExplicitTargets, insertTargets, previewTargets, supersedeQueued, supersedeQueuedOfDevices, type TargetQuery } from './deployment-targets';
import { evaluateDeployment } from './deployment-progress';

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
  async preview(actor: Actor, raw: DeployInput): Promise<{ targetCount: number; sampleSerials: string[]; model: string; targetVersion: string }> {
    const input = DeployInput.parse(raw);
    const { query, firmware } = await this.resolve(this.deps.knex, actor, input);
    const { count, sample } = await previewTargets(this.deps.knex, query);
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
      await trx('accounts').where({ id: actor.accountId }).forUpdate().first('id');
      const { query, firmware, filter } = await this.resolve(trx, actor, input);
      const now = this.deps.clock.now();
      const scheduledAt = input.scheduled_at ? new Date(input.scheduled_at) : null;
      const future = scheduledAt !== null && scheduledAt.getTime() > now.getTime();
      await trx('deployments').insert({
        id,
        account_id: actor.accountId,
        firmware_version_id: firmware.id,
        model_id: firmware.model_id,
        target_version: firmware.version,
        kind: 'deploy',
        status: future ? 'scheduled' : 'running',
        filter: JSON.stringify(filter),
        rollout: rollout ? JSON.stringify(rollout) : null,
        respect_maintenance_window: input.respect_maintenance_window,
        created_by: actor.principal,
        scheduled_at: scheduledAt,
        started_at: future ? null : now,
        created_at: now,
        updated_at: now,
      });
      const older = await supersedeQueued(trx, query, { deploymentId: id, now });
      const count = await insertTargets(trx, query, { deploymentId: id, firmwareVersionId: firmware.id, batches: rollout?.batches ?? [100], now });
      await trx('deployments').where({ id }).update({ target_count: count });
      await appendEvents(trx, this.deps.clock, [
        { accountId: actor.accountId, type: 'deployment.created', subject: id, data: { deployment_id: id, kind: 'deploy', model: firmware.model, target_version: firmware.version, target_count: count } },
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
    const row = await this.findRow(this.deps.knex, actor, input.id);
    const counts = await countsFor(this.deps.knex, [row.id]);
    return toDeployment(row, counts.get(row.id)!, row.model!);
  }

  /** Newest first, keyset paged. */
  async list(actor: Actor, raw: ListDeploymentsInput): Promise<{ deployments: Deployment[]; nextCursor: string | null }> {
    const input = ListDeploymentsInput.parse(raw);
    const q = this.deps
      .knex('deployments as p')
      .join('models as m', 'm.id', 'p.model_id')
      .where('p.account_id', actor.accountId)
      .select('p.*', 'm.name as model')
      .orderBy([{ column: 'p.created_at', order: 'desc' }, { column: 'p.id', order: 'desc' }])
      .limit(input.limit + 1);
    if (input.status) q.andWhere('p.status', input.status);
    if (input.cursor) {
      const [createdAt, id] = cursorCodec.decode(input.cursor, 2) as [string, string];
      if (!isUuid(id) || Number.isNaN(Date.parse(createdAt))) throw new DomainError('validation_failed', 'The cursor is not one this list returned.', { errors: [{ field: 'cursor', message: 'is invalid' }] });
      q.andWhereRaw('(p.created_at, p.id) < (?::timestamptz, ?::uuid)', [createdAt, id]);
    }
    const rows = (await q) as DeploymentRow[];
    const more = rows.length > input.limit;
    const page = more ? rows.slice(0, input.limit) : rows;
    const counts = await countsFor(this.deps.knex, page.map((r) => r.id));
    const last = page[page.length - 1];
    return {
      deployments: page.map((r) => toDeployment(r, counts.get(r.id)!, r.model!)),
      nextCursor: more && last ? cursorCodec.encode([new Date(last.created_at).toISOString(), last.id]) : null,
    };
  }

  /** The per-device states of a deployment, by serial, paged; `state=superseded` lists the ones taken over. */
  async devices(actor: Actor, input: { id: string } & ListDeploymentDevicesInput): Promise<{ devices: DeviceUpdateView[]; nextCursor: string | null }> {
    const { id, ...rest } = input;
    const page = ListDeploymentDevicesInput.parse(rest);
    const row = await this.findRow(this.deps.knex, actor, id);
    const q = this.deps
      .knex('device_updates as u')
      .join('devices as d', 'd.id', 'u.device_id')
      .where('u.deployment_id', row.id)
      .select('u.*', 'd.serial')
      .orderBy('d.serial')
      .limit(page.limit + 1);
    if (page.state === 'superseded') q.whereNotNull('u.superseded_by');
    else if (page.state === 'cancelled') q.where('u.state', 'cancelled').whereNull('u.superseded_by');
    else if (page.state) q.where('u.state', page.state);
    if (page.cursor) {
      const [serial] = cursorCodec.decode(page.cursor, 1) as [string];
      if (!isValidSerial(serial)) throw new DomainError('validation_failed', 'The cursor is not one this list returned.', { errors: [{ field: 'cursor', message: 'is invalid' }] });
      q.andWhere('d.serial', '>', serial);
    }
    const rows = (await q) as UpdateRowView[];
    const more = rows.length > page.limit;
    const items = more ? rows.slice(0, page.limit) : rows;
    return { devices: items.map(toUpdateView), nextCursor: more ? cursorCodec.encode([items[items.length - 1]!.serial]) : null };
  }

  /** Queued updates are cancelled (devices stay where they are); sent ones finish. */
  async cancel(actor: Actor, input: { id: string }): Promise<Deployment> {
    requireAdmin(actor);
    await this.deps.transaction(async (trx) => {
      const row = await this.lockRow(trx, actor, input.id, 'cancel');
      const now = this.deps.clock.now();
      const cancelled = await trx.raw(
        `UPDATE device_updates SET state = 'cancelled', error = 'deployment cancelled', finished_at = ?, state_changed_at = ?, deadline_at = NULL
          WHERE deployment_id = ? AND state = 'queued' RETURNING id`,
        [now, now, row.id],
      );
      if ((cancelled.rowCount as number) > 0) {
        await trx.raw(
          `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
           SELECT account_id, device_id, 'update_step', jsonb_build_object('state', 'cancelled', 'job_id', id, 'deployment_id', deployment_id, 'target_version', target_version, 'reason', 'deployment cancelled'), ?
             FROM device_updates WHERE id = ANY(?::uuid[])`,
          [now, (cancelled.rows as Array<{ id: string }>).map((r) => r.id)],
        );
      }
      await trx('deployments').where({ id: row.id }).update({ status: 'cancelled', paused_reason: null, updated_at: now });
      await appendEvents(trx, this.deps.clock, [{ accountId: actor.accountId, type: 'deployment.updated', subject: row.id, data: { deployment_id: row.id, status: 'cancelled', change: 'cancelled', by: actor.principal } }]);
      await evaluateDeployment(trx, this.deps.clock, row.id);
    });
    return this.get(actor, input);
  }

  async pause(actor: Actor, input: { id: string }): Promise<Deployment> {
    requireAdmin(actor);
    await this.deps.transaction(async (trx) => {
      const row = await this.lockRow(trx, actor, input.id, 'pause');
      await trx('deployments').where({ id: row.id }).update({ status: 'paused', paused_reason: 'paused_by_user', updated_at: this.deps.clock.now() });
      await appendEvents(trx, this.deps.clock, [{ accountId: actor.accountId, type: 'deployment.paused', subject: row.id, data: { deployment_id: row.id, reason: 'paused_by_user', by: actor.principal } }]);
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
      const failures = await trx.raw(
        `SELECT count(*)::int AS n FROM device_updates WHERE deployment_id = ? AND (state IN ('failed','timed_out','rolled_back') OR health_failed_at IS NOT NULL)`,
        [row.id],
      );
      const now = this.deps.clock.now();
      const batchCount = (row.rollout as { batches?: number[] } | null)?.batches?.length ?? 1;
      const nextBatch = row.paused_reason === 'batch_success_below_minimum' ? Math.min(row.current_batch + 1, batchCount - 1) : row.current_batch;
      const status = row.scheduled_at && !row.started_at && new Date(row.scheduled_at).getTime() > now.getTime() ? 'scheduled' : 'running';
      await trx('deployments').where({ id: row.id }).update({
        status,
        paused_reason: null,
        failures_acknowledged: Number(failures.rows[0].n),
        current_batch: nextBatch,
        started_at: row.started_at ?? (status === 'running' ? now : null),
        updated_at: now,
      });
      await appendEvents(trx, this.deps.clock, [{ accountId: actor.accountId, type: 'deployment.updated', subject: row.id, data: { deployment_id: row.id, status, change: 'resumed', by: actor.principal } }]);
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
      await trx('accounts').where({ id: actor.accountId }).forUpdate().first('id');
      const parent = await this.findRow(trx, actor, input.id);
      const failed = (await trx('device_updates as u')
        .join('devices as d', 'd.id', 'u.device_id')
        .where('u.deployment_id', parent.id)
        .whereIn('u.state', ['failed', 'timed_out'])
        .select('u.device_id', 'd.firmware', 'u.firmware_version_id', 'u.target_version')) as Array<{ device_id: string; firmware: string | null; firmware_version_id: string; target_version: string }>;
      if (failed.length === 0) throw new DomainError('invalid_state', 'No device of this deployment failed or timed out.');
      const file = await trx('firmware_versions').where({ id: parent.firmware_version_id }).first('storage_key');
      if (!file?.storage_key) throw fileMissing([parent.target_version]);
      return this.insertChild(trx, actor, {
        id,
        parent,
        kind: 'retry',
        firmwareVersionId: parent.firmware_version_id,
        targetVersion: parent.target_version,
        targets: failed.map((f) => ({ deviceId: f.device_id, firmwareVersionId: f.firmware_version_id, targetVersion: f.target_version, fromVersion: f.firmware })),
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
      await trx('accounts').where({ id: actor.accountId }).forUpdate().first('id');
      const parent = await this.findRow(trx, actor, input.id);
      const changed = (await trx('device_updates as u')
        .join('devices as d', 'd.id', 'u.device_id')
        .where('u.deployment_id', parent.id)
        .where('u.state', 'succeeded')
        .whereNotNull('u.from_version')
        .select('u.device_id', 'u.from_version', 'd.firmware', 'd.model_id')) as Array<{ device_id: string; from_version: string; firmware: string | null; model_id: string }>;
      if (changed.length === 0) throw new DomainError('invalid_state', 'This deployment changed no device that had a known previous version.');
      const keys = [...new Set(changed.map((c) => versionKey(c.from_version)))];
      const versions = (await trx('firmware_versions')
        .where({ account_id: actor.accountId, model_id: parent.model_id })
        .whereIn('version_key', keys)
        .select('id', 'version', 'version_key', 'storage_key')) as Array<{ id: string; version: string; version_key: string; storage_key: string | null }>;
      const byKey = new Map(versions.map((v) => [v.version_key, v]));
      const missing = [...new Set(changed.filter((c) => !byKey.get(versionKey(c.from_version))?.storage_key).map((c) => c.from_version))];
      if (missing.length > 0) throw fileMissing(missing);
      const targets = changed.map((c) => {
        const v = byKey.get(versionKey(c.from_version))!;
        return { deviceId: c.device_id, firmwareVersionId: v.id, targetVersion: v.version, fromVersion: c.firmware };
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

  // ---- ClaimFirmwareScheduler: the claim's firmware goes through this engine (issue 4 item 3).

  async resolveVersion(trx: Knex.Transaction, input: { accountId: string; modelId: string; version: string }): Promise<{ id: string } | null> {
    const row = (await trx('firmware_versions')
      .where({ account_id: input.accountId, model_id: input.modelId, version_key: versionKey(input.version) })
      .first('id')) as { id: string } | undefined;
    return row ?? null;
  }

  async scheduleForClaim(
    trx: Knex.Transaction,
    input: { actor: Actor; modelId: string; firmwareVersionId: string; version: string; devices: Array<{ id: string; serial: string }> },
  ): Promise<{ deploymentId: string } | null> {
    if (input.devices.length === 0) return null;
    const fw = (await trx('firmware_versions').where({ id: input.firmwareVersionId, account_id: input.actor.accountId }).first('version')) as { version: string } | undefined;
    if (!fw) return null;
    const id = newId();
    const now = this.deps.clock.now();
    await trx('deployments').insert({
      id,
      account_id: input.actor.accountId,
      firmware_version_id: input.firmwareVersionId,
      model_id: input.modelId,
      target_version: fw.version,
      kind: 'claim',
      status: 'running',
      filter: JSON.stringify({ serials: input.devices.map((d) => d.serial) }),
      rollout: null,
      respect_maintenance_window: false,
      created_by: input.actor.principal,
      started_at: now,
      created_at: now,
      updated_at: now,
    });
    const count = await insertExplicitTargets(trx, {
      accountId: input.actor.accountId,
      deploymentId: id,
      now,
      targets: input.devices.map((d) => ({ deviceId: d.id, firmwareVersionId: input.firmwareVersionId, targetVersion: fw.version, fromVersion: null })),
    });
    await trx('deployments').where({ id }).update({ target_count: count });
    await appendEvents(trx, this.deps.clock, [
      { accountId: input.actor.accountId, type: 'deployment.created', subject: id, data: { deployment_id: id, kind: 'claim', target_version: fw.version, target_count: count } },
    ]);
    // Claimed devices are offline until they connect; the engine sends on their first connection.
    return { deploymentId: id };
  }

  // ---- internals


  private async insertChild(
    trx: Knex.Transaction,
    actor: Actor,
    input: { id: string; parent: DeploymentRow; kind: 'retry' | 'rollback'; firmwareVersionId: string; targetVersion: string; targets: Parameters<typeof insertExplicitTargets>[1]['targets'] },
  ): Promise<string[]> {
    const now = this.deps.clock.now();
    await trx('deployments').insert({
      id: input.id,
      account_id: actor.accountId,
      firmware_version_id: input.firmwareVersionId,
      model_id: input.parent.model_id,
      target_version: input.targetVersion,
      kind: input.kind,
      parent_deployment_id: input.parent.id,
      status: 'running',
      filter: JSON.stringify({ parent_deployment_id: input.parent.id }),
      rollout: null,
      respect_maintenance_window: input.parent.respect_maintenance_window,
      created_by: actor.principal,
      started_at: now,
      created_at: now,
      updated_at: now,
    });
    const older = await supersedeQueuedOfDevices(trx, { accountId: actor.accountId, deviceIds: input.targets.map((t) => t.deviceId), deploymentId: input.id, now });
    const count = await insertExplicitTargets(trx, { accountId: actor.accountId, deploymentId: input.id, now, targets: input.targets });
    await trx('deployments').where({ id: input.id }).update({ target_count: count });
    await appendEvents(trx, this.deps.clock, [
      { accountId: actor.accountId, type: 'deployment.created', subject: input.id, data: { deployment_id: input.id, kind: input.kind, parent_deployment_id: input.parent.id, target_version: input.targetVersion, target_count: count } },
    ]);
    await evaluateDeployment(trx, this.deps.clock, input.id);
    // Older deployments are re-evaluated after the commit (see deploy).
    return older;
  }

  private async resolve(db: Knex | Knex.Transaction, actor: Actor, input: z.output<typeof DeployInput>): Promise<{ query: TargetQuery; firmware: FirmwareRef; filter: DeploymentFilter }> {
    requireVersion(input.firmware_version, 'firmware_version');
    if (input.filter.firmware_lt !== undefined) requireVersion(input.filter.firmware_lt, 'filter.firmware_lt');
    const serials = input.serials ?? input.filter.serials;
    if (serials) {
      const bad = serials.map((s, i) => [s, i] as const).filter(([s]) => !isValidSerial(s));
      if (bad.length > 0) {
        throw new DomainError('invalid_serial', 'Some serials are not valid serial numbers.', { errors: bad.map(([, i]) => ({ field: `${input.serials ? 'serials' : 'filter.serials'}.${i}`, message: 'is not a valid serial' })) });
      }
    }
    let firmware: FirmwareRef;
    const key = versionKey(input.firmware_version);
    const base = () =>
      db('firmware_versions as f').join('models as m', 'm.id', 'f.model_id').where({ 'f.account_id': actor.accountId, 'f.version_key': key }).select('f.id', 'f.model_id', 'm.name as model', 'f.version', 'f.storage_key');
    if (input.filter.model !== undefined) {
      const model = await this.area.models.requireByName(actor, input.filter.model, db as Knex.Transaction, 'filter.model');
      const row = (await base().andWhere('f.model_id', model.id).first()) as FirmwareRef | undefined;
      if (!row) throw versionNotFound(input.firmware_version, `model "${model.name}"`);
      firmware = row;
    } else {
      const rows = (await base()) as FirmwareRef[];
      if (rows.length === 0) throw versionNotFound(input.firmware_version, 'any model of this account');
      if (rows.length > 1) {
        throw new DomainError('validation_failed', `Version ${input.firmware_version} exists for several models; name one.`, { errors: [{ field: 'filter.model', message: 'is required: the version exists for several models' }] });
      }
      firmware = rows[0]!;
    }
    if (!firmware.storage_key) throw fileMissing([firmware.version]);
    const filter: DeploymentFilter = { model: firmware.model };
    if (input.filter.firmware_lt !== undefined) filter.firmware_lt = input.filter.firmware_lt;
    if (input.filter.status !== undefined) filter.status = input.filter.status;
    if (serials) filter.serials = serials;
    return {
      query: { accountId: actor.accountId, modelId: firmware.model_id, targetVersion: firmware.version, firmwareLt: input.filter.firmware_lt, status: input.filter.status, serials },
      firmware,
      filter,
    };
  }

  private async findRow(db: Knex | Knex.Transaction, actor: Actor, id: string): Promise<DeploymentRow> {
    if (!isUuid(id)) throw notFound('Deployment');
    const row = (await db('deployments as p').join('models as m', 'm.id', 'p.model_id').where({ 'p.account_id': actor.accountId, 'p.id': id }).first('p.*', 'm.name as model')) as DeploymentRow | undefined;
    if (!row) throw notFound('Deployment');
    return row;
  }

  private async lockRow(trx: Knex.Transaction, actor: Actor, id: string, action: keyof typeof DEPLOYMENT_ACTIONS): Promise<DeploymentRow> {
    if (!isUuid(id)) throw notFound('Deployment');
    const row = (await trx('deployments').where({ account_id: actor.accountId, id }).forUpdate().first()) as DeploymentRow | undefined;
    if (!row) throw notFound('Deployment');
    if (!(DEPLOYMENT_ACTIONS[action] as readonly string[]).includes(row.status)) {
      throw new DomainError('invalid_state', `A ${row.status} deployment cannot be ${action === 'cancel' ? 'cancelled' : action === 'pause' ? 'paused' : 'resumed'}.`, { details: { status: row.status } });
    }
    return row;
  }
}

