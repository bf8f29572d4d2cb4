import type { Deployment, DeviceUpdateView } from '#core/deployments/deployment-types';
import { progressPercent } from '#core/deployments/progress-rules';

export const presentDeployment = (d: Deployment) => ({
  id: d.id,
  kind: d.kind,
  model: d.model,
  firmware_version_id: d.firmwareVersionId,
  target_version: d.targetVersion,
  status: d.status,
  filter: { ...d.filter },
  rollout: d.rollout ? { ...d.rollout } : null,
  respect_maintenance_window: d.respectMaintenanceWindow,
  target_count: d.targetCount,
  counts: d.counts,
  failure_codes: d.failureCodes.map((f) => ({ code: f.code, count: f.count })),
  progress_percent: progressPercent(d),
  current_batch: d.currentBatch,
  batch_count: d.batchCount,
  paused_reason: d.pausedReason,
  parent_deployment_id: d.parentDeploymentId,
  created_by: d.createdBy,
  scheduled_at: d.scheduledAt,
  started_at: d.startedAt,
  finished_at: d.finishedAt,
  created_at: d.createdAt,
  updated_at: d.updatedAt,
});

export const presentDeviceUpdate = (u: DeviceUpdateView) => ({
  serial: u.serial,
  job_id: u.jobId,
  state: u.state,
  progress: u.progress,
  from_version: u.fromVersion,
  target_version: u.targetVersion,
  error: u.error,
  error_code: u.errorCode,
  batch: u.batch,
  attempts: u.attempts,
  superseded_by: u.supersededBy,
  health_failed: u.healthFailed,
  sent_at: u.sentAt,
  state_changed_at: u.stateChangedAt,
  finished_at: u.finishedAt,
});

/** The answer of a dry run: what the deploy would target now. */
export const presentDeployPreview = (p: {
  targetCount: number;
  sampleSerials: string[];
  model: string;
  targetVersion: string;
}) => ({
  dry_run: true as const,
  target_count: p.targetCount,
  sample_serials: p.sampleSerials,
  model: p.model,
  target_version: p.targetVersion,
});

/** The 202 answer of a deploy; `statusUrl` is also its Location. */
export const presentDeployAccepted = (d: Deployment, statusUrl: string) => ({
  deployment_id: d.id,
  target_count: d.targetCount,
  status: d.status,
  status_url: statusUrl,
  deployment: presentDeployment(d),
});
