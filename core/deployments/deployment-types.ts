import { FIXTURE_SIGNALS } from '../health/fixture-gate';
import { z } from 'zod';
import type { OtaErrorCode } from '#protocol/payloads';
import type { HeldSummary } from './held-updates';
import type { TransferSummary } from './delta-transfer';
import type { HoldReason } from './update-locks';

/**
 * Per-device update states (docs/ota.md). Persisted values: never rename.
 * - queued: waiting (device offline, outside its window, batch not open, deployment paused)
 * - sent: command published on devices/{serial}/ota; re-sent with the same job id on reconnect
 * - downloading / installing / rebooting: reported by the device
 * - succeeded: boot-confirmed (a heartbeat on the target version), or already installed
 * - failed: the device reported `failed`; timed_out: a deadline passed; cancelled: cancelled or
 *   superseded before it was sent; rolled_back: the device reverted to its old firmware.
 */
export const UPDATE_STATES = [
  'queued',
  'sent',
  'downloading',
  'installing',
  'rebooting',
  'succeeded',
  'failed',
  'timed_out',
  'cancelled',
  'rolled_back',
] as const;
export type UpdateState = (typeof UPDATE_STATES)[number];
export const ACTIVE_STATES = [
  'queued',
  'sent',
  'downloading',
  'installing',
  'rebooting',
] as const satisfies readonly UpdateState[];
/** On the device: a command went out and no final answer came yet. */
export const IN_FLIGHT_STATES = [
  'sent',
  'downloading',
  'installing',
  'rebooting',
] as const satisfies readonly UpdateState[];
/**
 * The states an update ends in: nothing moves it on afterwards. The one list of them. A
 * superseded update is one of them (`cancelled`, with `superseded_by`): not a state of its own.
 */
export const FINAL_UPDATE_STATES = [
  'succeeded',
  'failed',
  'timed_out',
  'cancelled',
  'rolled_back',
] as const satisfies readonly UpdateState[];
export type FinalUpdateState = (typeof FINAL_UPDATE_STATES)[number];
/** Counted against a rollout's failure threshold (plus updates failed by the health gate). */
export const FAILURE_STATES = ['failed', 'timed_out', 'rolled_back'] as const satisfies readonly UpdateState[];
/** What `retry-failed` sends again: rolled-back devices reverted themselves and are not retried. */
export const RETRYABLE_STATES = ['failed', 'timed_out'] as const satisfies readonly UpdateState[];

export const isFinal = (s: UpdateState): boolean => (FINAL_UPDATE_STATES as readonly string[]).includes(s);

/**
 * Deployment states. Persisted values: never rename.
 * - scheduled / running / paused: under way (see ACTIVE_DEPLOYMENT_STATUSES);
 * - completed: nothing left to do and nothing failed; completed_with_failures: some failed;
 * - superseded: nothing left to do, and every target was taken over by newer deployments
 *   before it was sent, so this one installed nothing (a claim's firmware overtaken by a
 *   deploy of a newer version before the devices connected, for example);
 * - cancelled: an operator cancelled it.
 */
export const DEPLOYMENT_STATUSES = [
  'scheduled',
  'running',
  'paused',
  'completed',
  'completed_with_failures',
  'superseded',
  'cancelled',
] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];
export const DEPLOYMENT_KINDS = ['deploy', 'claim', 'rollback', 'retry'] as const;
export type DeploymentKind = (typeof DEPLOYMENT_KINDS)[number];

/** Which deployment statuses an API action may start from (others: 409 invalid_state). */
export const DEPLOYMENT_ACTIONS = {
  pause: ['scheduled', 'running'],
  resume: ['paused'],
  cancel: ['scheduled', 'running', 'paused'],
} as const satisfies Record<string, readonly DeploymentStatus[]>;
export type DeploymentAction = keyof typeof DEPLOYMENT_ACTIONS;

/** The actions of DEPLOYMENT_ACTIONS a deployment in this status allows now. */
export const allowedActions = (status: DeploymentStatus): DeploymentAction[] =>
  // Object.keys types its keys as string; these are the table's own keys.
  (Object.keys(DEPLOYMENT_ACTIONS) as DeploymentAction[]).filter((action) =>
    (DEPLOYMENT_ACTIONS[action] as readonly DeploymentStatus[]).includes(status),
  );

/**
 * Deployments still under way (they may yet send updates): exactly the statuses a deployment
 * can be cancelled from. The portal's dashboard lists these as active.
 */
export const ACTIVE_DEPLOYMENT_STATUSES = DEPLOYMENT_ACTIONS.cancel;
export const isActive = (status: DeploymentStatus): boolean =>
  (ACTIVE_DEPLOYMENT_STATUSES as readonly DeploymentStatus[]).includes(status);

/**
 * The longest health window a rollout may set (24 hours): the health gate reads only updates that
 * finished within it (store/update-health.store.ts countReconnects).
 */
export const MAX_HEALTH_WINDOW_MINUTES = 24 * 60;

/**
 * Staged rollout (docs/ota.md "Staged rollout"), by its stored (and wire) names:
 * - `batches`: cumulative percentages of the targets, strictly increasing, ending at 100
 *   ([1, 10, 50, 100]: 1 % first, then up to 10 %, ...). Targets are spread over the batches in
 *   a pseudo-random but fixed order (a hash of device and deployment id).
 * - `min_batch_success_percent`: the next batch opens when at least this share of the opened
 *   targets succeeded (default 90).
 * - `failure_threshold_percent`: when failures (failed, timed_out, rolled_back, health-gate
 *   failures) exceed this share of the opened targets the deployment pauses itself
 *   (`deployment.paused`, reason `failure_threshold`). Unset: never pauses itself.
 * - `max_concurrent_per_tag`: at most `max` devices with the same value of tag `tag` have an
 *   update in flight at once (within the deployment); devices without the tag are not limited.
 * - `health_window_minutes` / `health_max_reconnects`: a device that reconnects more than that
 *   many times within that many minutes after its update succeeded counts as a failure.
 * - `fixture_signals`, `fixture_max_ratio`, `fixture_min_device_days`, `fixture_min_events`,
 *   `fixture_confidence`, `fixture_baseline_days`: the health gate's fixture signals (docs/ota.md
 *   "Health gate"): pause when the updated devices are worse than control beyond the ratio.
 *
 * `ROLLOUT_RULES` holds the rule (and default) of each setting, under its input name: the deploy
 * input (`RolloutInput`), the stored rollout (`Rollout`) and the adapters' own schemas are all
 * built from it, so they cannot drift apart.
 */
export const ROLLOUT_RULES = {
  batches: z
    .array(z.number().gt(0).max(100))
    .min(1)
    .max(20)
    .refine((b) => b.every((v, i) => i === 0 || v > b[i - 1]!), 'must be strictly increasing cumulative percentages')
    .refine((b) => b[b.length - 1] === 100, 'the last batch must be 100 (every target)')
    .default([100]),
  failureThresholdPercent: z.number().min(0).max(100).optional(),
  minBatchSuccessPercent: z.number().min(0).max(100).default(90),
  maxConcurrentPerTag: z
    .strictObject({ tag: z.string().min(1).max(64), max: z.number().int().min(1).max(100_000) })
    .optional(),
  healthWindowMinutes: z.number().min(0).max(MAX_HEALTH_WINDOW_MINUTES).default(10),
  healthMaxReconnects: z.number().int().min(1).max(1000).default(3),
  // Fixture signals of the health gate (docs/ota.md "Health gate"; core/health/fixture-gate.ts).
  fixtureSignals: z.array(z.enum(FIXTURE_SIGNALS)).max(FIXTURE_SIGNALS.length).default([]),
  fixtureMaxRatio: z.number().min(1).max(100).default(2),
  fixtureMinDeviceDays: z.number().min(1).max(1_000_000).default(50),
  fixtureMinEvents: z.number().int().min(1).max(1_000_000).default(3),
  fixtureConfidence: z.number().min(0.5).max(0.9999).default(0.95),
  fixtureBaselineDays: z.number().int().min(1).max(365).default(30),
};

/** The rollout of a deploy request (camelCase, like every input of the domain). */
export const RolloutInput = z.strictObject(ROLLOUT_RULES);
export type RolloutInput = z.input<typeof RolloutInput>;

/**
 * A rollout as stored with its deployment (JSON, snake_case) and read by the rules; the REST
 * document shows it as it is.
 */
export const Rollout = z.strictObject({
  batches: ROLLOUT_RULES.batches,
  failure_threshold_percent: ROLLOUT_RULES.failureThresholdPercent,
  min_batch_success_percent: ROLLOUT_RULES.minBatchSuccessPercent,
  max_concurrent_per_tag: ROLLOUT_RULES.maxConcurrentPerTag,
  health_window_minutes: ROLLOUT_RULES.healthWindowMinutes,
  health_max_reconnects: ROLLOUT_RULES.healthMaxReconnects,
  fixture_signals: ROLLOUT_RULES.fixtureSignals,
  fixture_max_ratio: ROLLOUT_RULES.fixtureMaxRatio,
  fixture_min_device_days: ROLLOUT_RULES.fixtureMinDeviceDays,
  fixture_min_events: ROLLOUT_RULES.fixtureMinEvents,
  fixture_confidence: ROLLOUT_RULES.fixtureConfidence,
  fixture_baseline_days: ROLLOUT_RULES.fixtureBaselineDays,
});
export type Rollout = z.output<typeof Rollout>;

export const DEFAULT_ROLLOUT: Rollout = Rollout.parse({});

/** A deploy request's rollout (parsed, defaults filled in) as it is stored. */
export function toRollout(input: z.output<typeof RolloutInput>): Rollout {
  return {
    batches: input.batches,
    ...(input.failureThresholdPercent !== undefined
      ? { failure_threshold_percent: input.failureThresholdPercent }
      : {}),
    min_batch_success_percent: input.minBatchSuccessPercent,
    ...(input.maxConcurrentPerTag !== undefined ? { max_concurrent_per_tag: input.maxConcurrentPerTag } : {}),
    health_window_minutes: input.healthWindowMinutes,
    health_max_reconnects: input.healthMaxReconnects,
    fixture_signals: input.fixtureSignals,
    fixture_max_ratio: input.fixtureMaxRatio,
    fixture_min_device_days: input.fixtureMinDeviceDays,
    fixture_min_events: input.fixtureMinEvents,
    fixture_confidence: input.fixtureConfidence,
    fixture_baseline_days: input.fixtureBaselineDays,
  };
}

export interface DeploymentCounts {
  queued: number;
  sent: number;
  downloading: number;
  installing: number;
  rebooting: number;
  succeeded: number;
  failed: number;
  timed_out: number;
  cancelled: number;
  rolled_back: number;
  /** Cancelled because a newer deployment took the device over (not included in `cancelled`). */
  superseded: number;
  /** Succeeded updates the health gate marked as failures. */
  health_failed: number;
  /** Devices left alone: no upgrade path leads from their version to the target (not included in `cancelled`). */
  no_upgrade_path: number;
}

export const emptyCounts = (): DeploymentCounts => ({
  queued: 0,
  sent: 0,
  downloading: 0,
  installing: 0,
  rebooting: 0,
  succeeded: 0,
  failed: 0,
  timed_out: 0,
  cancelled: 0,
  rolled_back: 0,
  superseded: 0,
  health_failed: 0,
  no_upgrade_path: 0,
});

export interface DeploymentFilter {
  model?: string;
  firmware_lt?: string;
  status?: string;
  serials?: string[];
  /** The id of the site the targets were limited to (docs/ota.md "Sites"). */
  site?: string;
}

export interface Deployment {
  id: string;
  kind: DeploymentKind;
  modelId: string;
  model: string;
  firmwareVersionId: string;
  targetVersion: string;
  status: DeploymentStatus;
  filter: DeploymentFilter;
  rollout: Rollout | null;
  respectMaintenanceWindow: boolean;
  targetCount: number;
  counts: DeploymentCounts;
  /** Failed and rolled-back updates per reported error_code (null: none given), most frequent first. */
  failureCodes: FailureCodeCount[];
  currentBatch: number;
  batchCount: number;
  pausedReason: string | null;
  parentDeploymentId: string | null;
  createdBy: string | null;
  scheduledAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  createdAt: string;
  updatedAt: string;
  /** Queued updates held now by a device lock or a site freeze (docs/ota.md "Update locks"); read views fill it. */
  held?: HeldSummary;
  /** Bytes sent against full-image bytes (docs/ota.md "Delta images"); read views fill it. */
  transfer?: TransferSummary;
}

export interface DeviceUpdateView {
  jobId: string;
  serial: string;
  state: UpdateState;
  progress: number;
  fromVersion: string | null;
  targetVersion: string;
  error: string | null;
  /** Why it failed, from the protocol's vocabulary (failed and rolled_back); null when the device gave none. */
  errorCode: OtaErrorCode | null;
  batch: number;
  attempts: number;
  supersededBy: string | null;
  healthFailed: boolean;
  /** Upgrade paths: where the device's path ends (null: an ordinary one-hop update), and this hop's place in it. */
  finalVersion: string | null;
  hop: number | null;
  hopCount: number | null;
  sentAt: string | null;
  stateChangedAt: string;
  finishedAt: string | null;
  /** A queued update held now: why, and when the hold ends (null: unknown). Null otherwise. */
  held?: { reason: HoldReason; until: string | null } | null;
}

/** A deployment as stored (the API's `Deployment` adds its counts and model name). */
export interface DeploymentRecord {
  id: string;
  accountId: string;
  kind: DeploymentKind;
  modelId: string;
  firmwareVersionId: string;
  targetVersion: string;
  status: DeploymentStatus;
  filter: DeploymentFilter;
  rollout: Rollout | null;
  respectMaintenanceWindow: boolean;
  targetCount: number;
  /** Batches 0..currentBatch are open. */
  currentBatch: number;
  pausedReason: string | null;
  /** Failures a person saw when resuming: the threshold counts only those beyond. */
  failuresAcknowledged: number;
  parentDeploymentId: string | null;
  createdBy: string | null;
  scheduledAt: Date | null;
  startedAt: Date | null;
  finishedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A stored rollout as the API accepts it; anything else (written around the API) reads as none. */
export function parseRollout(value: unknown): Rollout | null {
  if (value === null || value === undefined) return null;
  const parsed = Rollout.safeParse(value);
  return parsed.success ? parsed.data : null;
}

/** How many failed or rolled-back updates of a deployment reported this error code (null: none). */
export interface FailureCodeCount {
  code: OtaErrorCode | null;
  count: number;
}

export function toDeployment(
  record: DeploymentRecord,
  counts: DeploymentCounts,
  model: string,
  failureCodes: FailureCodeCount[],
): Deployment {
  return {
    id: record.id,
    kind: record.kind,
    modelId: record.modelId,
    model,
    firmwareVersionId: record.firmwareVersionId,
    targetVersion: record.targetVersion,
    status: record.status,
    filter: record.filter,
    rollout: record.rollout,
    respectMaintenanceWindow: record.respectMaintenanceWindow,
    targetCount: record.targetCount,
    counts,
    failureCodes,
    currentBatch: record.currentBatch,
    batchCount: record.rollout ? record.rollout.batches.length : 1,
    pausedReason: record.pausedReason,
    parentDeploymentId: record.parentDeploymentId,
    createdBy: record.createdBy,
    scheduledAt: record.scheduledAt?.toISOString() ?? null,
    startedAt: record.startedAt?.toISOString() ?? null,
    finishedAt: record.finishedAt?.toISOString() ?? null,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
  };
}

/** Per batch: the outcome counts of its targets, what the rollout evaluation decides from. */
export interface BatchTally {
  /** Targets still this deployment's (neither superseded nor cancelled). */
  total: number;
  /** Targets a newer deployment took over. */
  superseded: number;
  /** Queued or in flight. */
  active: number;
  /** Succeeded and not failed by the health gate. */
  succeeded: number;
  /** In a failure state, or failed by the health gate. */
  failures: number;
}

/** One device's update, as the state machine's writes and their events name it. */
export interface UpdateRef {
  id: string;
  accountId: string;
  deviceId: string;
  deploymentId: string;
  serial: string;
  targetVersion: string;
  fromVersion: string | null;
  /** Set by finishUpdates: this hop of an upgrade path succeeded and its next hop is queued. */
  nextHopQueued?: boolean;
}
