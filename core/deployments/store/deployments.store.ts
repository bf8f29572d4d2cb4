import type { Knex } from 'knex';
import { sqlList } from '../../shared/sql-list';
import {
  ACTIVE_STATES,
  FAILURE_STATES,
  parseRollout,
  type BatchTally,
  type DeploymentFilter,
  type DeploymentKind,
  type DeploymentRecord,
  type DeploymentStatus,
} from '../deployment-types';
import type { Db } from '../../db/db';

interface DeploymentRow {
  id: string;
  account_id: string;
  firmware_version_id: string;
  model_id: string;
  target_version: string;
  kind: DeploymentKind;
  parent_deployment_id: string | null;
  status: DeploymentStatus;
  filter: DeploymentFilter | null;
  rollout: unknown;
  respect_maintenance_window: boolean;
  target_count: number;
  current_batch: number;
  paused_reason: string | null;
  failures_acknowledged: number;
  created_by: string | null;
  scheduled_at: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const date = (v: Date | string): Date => (v instanceof Date ? v : new Date(v));
const dateOrNull = (v: Date | string | null): Date | null => (v === null ? null : date(v));

function toDeploymentRecord(row: DeploymentRow): DeploymentRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    kind: row.kind,
    modelId: row.model_id,
    firmwareVersionId: row.firmware_version_id,
    targetVersion: row.target_version,
    status: row.status,
    filter: row.filter ?? {},
    rollout: parseRollout(row.rollout),
    respectMaintenanceWindow: row.respect_maintenance_window,
    targetCount: row.target_count,
    currentBatch: row.current_batch,
    pausedReason: row.paused_reason,
    failuresAcknowledged: row.failures_acknowledged,
    parentDeploymentId: row.parent_deployment_id,
    createdBy: row.created_by,
    scheduledAt: dateOrNull(row.scheduled_at),
    startedAt: dateOrNull(row.started_at),
    finishedAt: dateOrNull(row.finished_at),
    createdAt: date(row.created_at),
    updatedAt: date(row.updated_at),
  };
}

/** A deployment with its model's name (what reads for the API return). */
export interface NamedDeployment {
  deployment: DeploymentRecord;
  model: string;
}

const toNamed = (row: DeploymentRow & { model: string }): NamedDeployment => ({
  deployment: toDeploymentRecord(row),
  model: row.model,
});

/** A new deployment's row. Left-out optional fields take the column's default. */
export interface NewDeployment {
  id: string;
  accountId: string;
  firmwareVersionId: string;
  modelId: string;
  targetVersion: string;
  kind: DeploymentKind;
  parentDeploymentId?: string;
  status: DeploymentStatus;
  filter: DeploymentFilter | { parent_deployment_id: string };
  rollout: unknown;
  respectMaintenanceWindow: boolean;
  createdBy: string | null;
  scheduledAt?: Date | null;
  startedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export async function insertDeployment(trx: Knex.Transaction, d: NewDeployment): Promise<void> {
  await trx('deployments').insert({
    id: d.id,
    account_id: d.accountId,
    firmware_version_id: d.firmwareVersionId,
    model_id: d.modelId,
    target_version: d.targetVersion,
    kind: d.kind,
    ...(d.parentDeploymentId !== undefined ? { parent_deployment_id: d.parentDeploymentId } : {}),
    status: d.status,
    filter: JSON.stringify(d.filter),
    rollout: d.rollout ? JSON.stringify(d.rollout) : null,
    respect_maintenance_window: d.respectMaintenanceWindow,
    created_by: d.createdBy,
    ...(d.scheduledAt !== undefined ? { scheduled_at: d.scheduledAt } : {}),
    started_at: d.startedAt,
    created_at: d.createdAt,
    updated_at: d.updatedAt,
  });
}

/** The columns a deployment's life changes; only the fields given are written. */
export interface DeploymentChange {
  status?: DeploymentStatus;
  pausedReason?: string | null;
  failuresAcknowledged?: number;
  currentBatch?: number;
  startedAt?: Date | null;
  finishedAt?: Date;
  targetCount?: number;
  updatedAt?: Date;
}

export async function updateDeployment(
  trx: Knex.Transaction,
  input: { id: string; change: DeploymentChange },
): Promise<void> {
  const c = input.change;
  // In this column order: each statement keeps the text it had when written inline.
  const columns: Record<string, unknown> = {};
  if (c.status !== undefined) columns.status = c.status;
  if (c.pausedReason !== undefined) columns.paused_reason = c.pausedReason;
  if (c.failuresAcknowledged !== undefined) columns.failures_acknowledged = c.failuresAcknowledged;
  if (c.currentBatch !== undefined) columns.current_batch = c.currentBatch;
  if (c.startedAt !== undefined) columns.started_at = c.startedAt;
  if (c.finishedAt !== undefined) columns.finished_at = c.finishedAt;
  if (c.targetCount !== undefined) columns.target_count = c.targetCount;
  if (c.updatedAt !== undefined) columns.updated_at = c.updatedAt;
  await trx('deployments').where({ id: input.id }).update(columns);
}

/** The account's deployment `id` with its model's name, or null. */
export async function findDeployment(
  db: Db,
  input: { accountId: string; id: string },
): Promise<NamedDeployment | null> {
  const row: (DeploymentRow & { model: string }) | undefined = await db('deployments as p')
    .join('models as m', 'm.id', 'p.model_id')
    .where({ 'p.account_id': input.accountId, 'p.id': input.id })
    .first('p.*', 'm.name as model');
  return row ? toNamed(row) : null;
}

/** Newest first, keyset paged: at most `limit` deployments created before `before`. */
export async function listDeployments(
  db: Db,
  input: {
    accountId: string;
    status?: DeploymentStatus | undefined;
    before?: { createdAt: string; id: string } | undefined;
    limit: number;
  },
): Promise<NamedDeployment[]> {
  const q = db('deployments as p')
    .join('models as m', 'm.id', 'p.model_id')
    .where('p.account_id', input.accountId)
    .select<Array<DeploymentRow & { model: string }>>('p.*', 'm.name as model')
    .orderBy([
      { column: 'p.created_at', order: 'desc' },
      { column: 'p.id', order: 'desc' },
    ])
    .limit(input.limit);
  if (input.status) q.andWhere('p.status', input.status);
  if (input.before)
    q.andWhereRaw('(p.created_at, p.id) < (?::timestamptz, ?::uuid)', [input.before.createdAt, input.before.id]);
  const rows: Array<DeploymentRow & { model: string }> = await q;
  return rows.map(toNamed);
}

/** The account's deployment, locked until the transaction ends (operator actions), or null. */
export async function lockAccountDeployment(
  trx: Knex.Transaction,
  input: { accountId: string; id: string },
): Promise<DeploymentRecord | null> {
  const row = await trx<DeploymentRow>('deployments')
    .where({ account_id: input.accountId, id: input.id })
    .forUpdate()
    .first();
  return row ? toDeploymentRecord(row) : null;
}

/** The deployment, locked until the transaction ends (its evaluation), or null. */
export async function lockDeployment(trx: Knex.Transaction, id: string): Promise<DeploymentRecord | null> {
  const row = await trx<DeploymentRow>('deployments').where({ id }).forUpdate().first();
  return row ? toDeploymentRecord(row) : null;
}

/** The deployment as it is now, without a lock (each dispatch page reads it again), or null. */
export async function readDeployment(db: Db, id: string): Promise<DeploymentRecord | null> {
  const row = await db<DeploymentRow>('deployments').where({ id }).first();
  return row ? toDeploymentRecord(row) : null;
}

/** Waits for the deployment's row: dispatch decisions over several rows (a tag limit) take turns across processes. */
export async function takeDispatchTurn(trx: Knex.Transaction, id: string): Promise<void> {
  await trx('deployments').where({ id }).forUpdate().first('id');
}

/** Running deployments and scheduled ones whose time came: what the sweep evaluates and dispatches. */
export async function dueDeploymentIds(db: Db, now: Date): Promise<string[]> {
  // `void`: a builder is thenable, and knex does not await what a grouping callback returns.
  const scheduledAndDue = (s: Knex.QueryBuilder) =>
    void s.where('status', 'scheduled').andWhere('scheduled_at', '<=', now);
  return db('deployments')
    .where((q) => void q.where('status', 'running').orWhere(scheduledAndDue))
    .pluck('id');
}

/** Per batch: its targets' outcome counts (see BatchTally), one query over the deployment's rows. */
export async function tallyByBatch(db: Db, deploymentId: string): Promise<Map<number, BatchTally>> {
  const result = await db.raw<{ rows: Array<BatchTally & { batch: number }> }>(
    `SELECT batch,
            count(*) FILTER (WHERE superseded_by IS NULL AND state <> 'cancelled')::int AS total,
            count(*) FILTER (WHERE superseded_by IS NOT NULL)::int AS superseded,
            count(*) FILTER (WHERE state IN (${sqlList(ACTIVE_STATES)}))::int AS active,
            count(*) FILTER (WHERE state = 'succeeded' AND health_failed_at IS NULL)::int AS succeeded,
            count(*) FILTER (WHERE state IN (${sqlList(FAILURE_STATES)}) OR health_failed_at IS NOT NULL)::int AS failures
       FROM device_updates WHERE deployment_id = ? AND next_hop_id IS NULL GROUP BY batch`,
    [deploymentId],
  );
  const map = new Map<number, BatchTally>();
  for (const r of result.rows)
    map.set(r.batch, {
      total: r.total,
      superseded: r.superseded,
      active: r.active,
      succeeded: r.succeeded,
      failures: r.failures,
    });
  return map;
}

/** The deployment's failures so far (failure states and health-gate failures): what resuming acknowledges. */
export async function countFailures(db: Db, deploymentId: string): Promise<number> {
  const result = await db.raw<{ rows: Array<{ n: number }> }>(
    `SELECT count(*)::int AS n FROM device_updates WHERE deployment_id = ? AND next_hop_id IS NULL AND (state IN (${sqlList(FAILURE_STATES)}) OR health_failed_at IS NOT NULL)`,
    [deploymentId],
  );
  return result.rows[0]!.n;
}
