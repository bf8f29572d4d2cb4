import type { FirmwareVersion } from '#core/firmware/firmware.service';
import type { SigningKey, SigningKeys } from '#core/firmware/signing-key.service';
import type { Deployment, DeviceUpdateView } from '#core/deployments/deployment-types';
import { progressPercent } from '#core/deployments/progress-rules';

export const presentFirmwareVersion = (v: FirmwareVersion) => ({
  id: v.id,
  model: v.model,
  version: v.version,
  release_notes: v.releaseNotes,
  changelog: v.changelog,
  size: v.size,
  sha256: v.sha256,
  file_available: v.fileAvailable,
  signed: v.signed,
  key_id: v.signingKeyId,
  signature: v.signature,
  created_at: v.createdAt,
});

const presentSigningKey = (k: SigningKey) => ({
  key_id: k.keyId,
  algorithm: k.algorithm,
  public_key: k.publicKey,
  created_at: k.createdAt,
  retired_at: k.retiredAt,
});

export const presentSigningKeys = (keys: SigningKeys) => ({
  signing_key: keys.current ? presentSigningKey(keys.current) : null,
  retired_keys: keys.retired.map(presentSigningKey),
});

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
  batch: u.batch,
  attempts: u.attempts,
  superseded_by: u.supersededBy,
  health_failed: u.healthFailed,
  sent_at: u.sentAt,
  state_changed_at: u.stateChangedAt,
  finished_at: u.finishedAt,
});
