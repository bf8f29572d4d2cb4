import type { Knex } from 'knex';
import { RolloutInput, emptyCounts, type Deployment, type DeploymentCounts, type DeploymentRowStatus, type DeviceUpdateView, type UpdateState } from './deployment-types';

type Db = Knex | Knex.Transaction;

export interface DeploymentRow {
  id: string;
  account_id: string;
  firmware_version_id: string;
  model_id: string;
  model?: string;
  target_version: string;
  kind: Deployment['kind'];
  parent_deployment_id: string | null;
  status: DeploymentRowStatus;
  filter: Deployment['filter'];
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

const iso = (v: Date | string | null): string | null => (v === null ? null : new Date(v).toISOString());

export function parseRollout(value: unknown): Deployment['rollout'] {
  if (value === null || value === undefined) return null;
  const parsed = RolloutInput.safeParse(value);
  return parsed.success ? parsed.data : null;
}

export function toDeployment(row: DeploymentRow, counts: DeploymentCounts, model: string): Deployment {
  const rollout = parseRollout(row.rollout);
  return {
    id: row.id,
    kind: row.kind,
    modelId: row.model_id,
    model,
    firmwareVersionId: row.firmware_version_id,
    targetVersion: row.target_version,
    status: row.status,
    filter: row.filter ?? {},
    rollout,
    respectMaintenanceWindow: row.respect_maintenance_window,
    targetCount: row.target_count,
    counts,
    currentBatch: row.current_batch,
    batchCount: rollout ? rollout.batches.length : 1,
    pausedReason: row.paused_reason,
    parentDeploymentId: row.parent_deployment_id,
    createdBy: row.created_by,
    scheduledAt: iso(row.scheduled_at),
    startedAt: iso(row.started_at),
    finishedAt: iso(row.finished_at),
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

/** Counts per state (superseded and health-gate failures apart) for several deployments, one query. */
export async function countsFor(db: Db, deploymentIds: string[]): Promise<Map<string, DeploymentCounts>> {
  const map = new Map<string, DeploymentCounts>(deploymentIds.map((id) => [id, emptyCounts()]));
  if (deploymentIds.length === 0) return map;
  const result = await db.raw(
    `SELECT deployment_id, state, (superseded_by IS NOT NULL) AS superseded, (health_failed_at IS NOT NULL) AS health_failed, count(*)::int AS n
       FROM device_updates WHERE deployment_id = ANY(?::uuid[]) GROUP BY 1, 2, 3, 4`,
    [deploymentIds],
  );
  for (const r of result.rows as Array<{ deployment_id: string; state: UpdateState; superseded: boolean; health_failed: boolean; n: number }>) {
    const c = map.get(r.deployment_id)!;
    if (r.superseded) c.superseded += r.n;
    else c[r.state] += r.n;
    if (r.health_failed) c.health_failed += r.n;
  }
  return map;
}

/** Per batch: opened targets' outcome counts, used by the rollout evaluation. */
export interface BatchTally {
  total: number;
  active: number;
  succeeded: number;
  failures: number;
}

export async function tallyByBatch(db: Db, deploymentId: string): Promise<Map<number, BatchTally>> {
  const result = await db.raw(
    `SELECT batch,
            count(*) FILTER (WHERE superseded_by IS NULL AND state <> 'cancelled')::int AS total,
            count(*) FILTER (WHERE state IN ('queued','sent','downloading','installing','rebooting'))::int AS active,
            count(*) FILTER (WHERE state = 'succeeded' AND health_failed_at IS NULL)::int AS succeeded,
            count(*) FILTER (WHERE state IN ('failed','timed_out','rolled_back') OR health_failed_at IS NOT NULL)::int AS failures
       FROM device_updates WHERE deployment_id = ? GROUP BY batch`,
    [deploymentId],
  );
  const map = new Map<number, BatchTally>();
  for (const r of result.rows as Array<BatchTally & { batch: number }>) map.set(r.batch, { total: r.total, active: r.active, succeeded: r.succeeded, failures: r.failures });
  return map;
}

export interface UpdateRowView {
  id: string;
  serial: string;
  state: UpdateState;
  progress: number;
  from_version: string | null;
  target_version: string;
  error: string | null;
  batch: number;
  attempts: number;
  superseded_by: string | null;
  health_failed_at: Date | null;
  sent_at: Date | null;
  state_changed_at: Date;
  finished_at: Date | null;
}

export const toUpdateView = (r: UpdateRowView): DeviceUpdateView => ({
  jobId: r.id,
  serial: r.serial,
  state: r.state,
  progress: r.progress,
  fromVersion: r.from_version,
  targetVersion: r.target_version,
  error: r.error,
  batch: r.batch,
  attempts: r.attempts,
  supersededBy: r.superseded_by,
  healthFailed: r.health_failed_at !== null,
  sentAt: iso(r.sent_at),
  stateChangedAt: iso(r.state_changed_at)!,
  finishedAt: iso(r.finished_at),
});
