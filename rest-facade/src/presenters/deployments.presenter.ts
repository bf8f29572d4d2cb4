import type { Deployment, DeviceUpdateView } from '#core/deployments/deployment-types';
import { progressPercent } from '#core/deployments/progress-rules';
import { noneHeld, type HeldSummary } from '#core/deployments/held-updates';
import { noTransfer, type TransferSummary } from '#core/deployments/delta-transfer';
import type { DeltaPreview } from '#core/firmware/delta/delta-preview';
import type { UpgradePathsPreview } from '#core/deployments/upgrade-paths';

const presentHeld = (h: HeldSummary | undefined) => {
  const held = h ?? noneHeld();
  return {
    count: held.count,
    reasons: Object.fromEntries(held.reasons.map((r) => [r.reason, r.count])),
    serials: [...held.serials],
  };
};

const presentTransfer = (t: TransferSummary | undefined) => {
  const transfer = t ?? noTransfer();
  return {
    bytes_sent: transfer.bytesSent,
    full_image_bytes: transfer.fullImageBytes,
    delta_updates: transfer.deltaUpdates,
  };
};

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
  held: presentHeld(d.held),
  transfer: presentTransfer(d.transfer),
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
  final_version: u.finalVersion,
  hop: u.hop,
  hop_count: u.hopCount,
  sent_at: u.sentAt,
  state_changed_at: u.stateChangedAt,
  finished_at: u.finishedAt,
  held: u.held ?? null,
});

/** The answer of a dry run: what the deploy would target now. */
export const presentDeployPreview = (p: {
  targetCount: number;
  sampleSerials: string[];
  model: string;
  targetVersion: string;
  held?: HeldSummary;
  upgradePaths?: UpgradePathsPreview;
  deltas?: DeltaPreview[];
}) => ({
  dry_run: true as const,
  target_count: p.targetCount,
  sample_serials: p.sampleSerials,
  model: p.model,
  target_version: p.targetVersion,
  held: presentHeld(p.held),
  upgrade_paths: presentUpgradePaths(p.upgradePaths),
  deltas: (p.deltas ?? []).map((d) => ({
    from_version: d.fromVersion,
    devices: d.devices,
    status: d.status,
    delta_size: d.deltaSize,
    full_size: d.fullSize,
  })),
});

const presentUpgradePaths = (u: UpgradePathsPreview | undefined) => ({
  direct: u?.direct ?? 0,
  paths: (u?.paths ?? []).map((p) => ({ from_version: p.fromVersion, hops: [...p.hops], devices: p.devices })),
  no_upgrade_path: (u?.noUpgradePath ?? []).map((p) => ({ from_version: p.fromVersion, devices: p.devices })),
  no_upgrade_path_count: u?.noUpgradePathCount ?? 0,
});

/** The 202 answer of a deploy; `statusUrl` is also its Location. */
export const presentDeployAccepted = (d: Deployment, statusUrl: string) => ({
  deployment_id: d.id,
  target_count: d.targetCount,
  status: d.status,
  status_url: statusUrl,
  deployment: presentDeployment(d),
});
