import { z } from 'zod';
import {
  DEPLOYMENT_KINDS,
  DEPLOYMENT_STATUSES,
  ROLLOUT_RULES,
  UPDATE_STATES,
} from '#core/deployments/deployment-types';
import { HOLD_REASONS } from '#core/deployments/update-locks';
import { HELD_SAMPLE } from '#core/deployments/held-updates';
import { DeploySerials } from '#core/deployments/deployment-inputs';
import { DEVICE_STATUSES } from '#core/devices/device-types';
import { OTA_ERROR_CODES } from '#protocol/payloads';

/**
 * Wire schemas (snake_case) of the deployment routes. The deploy body is REST's own: the route
 * translates it into the domain's DeployInput (camelCase); the rules of each field are the
 * domain's (`ROLLOUT_RULES`, `DeploySerials`).
 */

export const RolloutBody = z
  .strictObject({
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
  })
  .meta({ id: 'RolloutInput' });

/**
 * POST /firmware/deploy (docs/ota.md "Deploy"). `filter.serials` or top-level `serials` (not
 * both) name explicit targets; a single device is one serial. `model` may be left out when the
 * version exists for exactly one model of the account. `dry_run` only counts (the preview).
 */
export const DeployBody = z
  .strictObject({
    firmware_version: z.string().min(1).max(64),
    filter: z
      .strictObject({
        model: z.string().min(1).max(64).optional(),
        firmware_lt: z.string().min(1).max(64).optional(),
        status: z.enum(DEVICE_STATUSES).optional(),
        serials: DeploySerials.optional(),
        site: z
          .string()
          .min(1)
          .max(100)
          .optional()
          .describe('Only devices of this site: its id, or its name (case-insensitive); 404 for an unknown site'),
      })
      .default({}),
    serials: DeploySerials.optional(),
    rollout: RolloutBody.optional(),
    respect_maintenance_window: z.boolean().default(true),
    scheduled_at: z.iso.datetime({ offset: true }).optional(),
    dry_run: z.boolean().default(false),
  })
  .refine((i) => !(i.serials && i.filter.serials), {
    path: ['serials'],
    message: 'give serials either at the top level or in filter, not both',
  })
  .meta({ id: 'DeployRequest' });
export type DeployBody = z.output<typeof DeployBody>;

export const ListDeploymentsQuery = z.strictObject({
  status: z.enum(DEPLOYMENT_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().max(200).optional(),
});

export const DeploymentDevicesQuery = z.strictObject({
  state: z.enum([...UPDATE_STATES, 'superseded', 'no_upgrade_path']).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().max(200).optional(),
});

export const DeploymentCountsSchema = z
  .object({
    queued: z.number().int(),
    sent: z.number().int(),
    downloading: z.number().int(),
    installing: z.number().int(),
    rebooting: z.number().int(),
    succeeded: z.number().int(),
    failed: z.number().int(),
    timed_out: z.number().int(),
    cancelled: z.number().int(),
    rolled_back: z.number().int(),
    superseded: z.number().int(),
    health_failed: z.number().int(),
    no_upgrade_path: z
      .number()
      .int()
      .describe(
        'Devices left alone: no upgrade path leads from their version to the target (docs/ota.md "Upgrade paths"); not in cancelled',
      ),
  })
  .meta({ id: 'DeploymentCounts' });

/** The dry run's plan of upgrade paths (docs/ota.md "Upgrade paths"). */
export const UpgradePathsSchema = z
  .object({
    direct: z
      .number()
      .int()
      .describe('Targets the version allows directly (or whose version is not known yet: planned when they report it)'),
    paths: z
      .array(
        z.object({
          from_version: z.string(),
          hops: z.array(z.string()).describe('The versions installed in turn; the last is the target'),
          devices: z.number().int(),
        }),
      )
      .describe('Per version the targets run: the planned path and how many devices take it, most devices first'),
    no_upgrade_path: z
      .array(z.object({ from_version: z.string(), devices: z.number().int() }))
      .describe(
        'Versions from which no path leads to the target: those devices are listed as no_upgrade_path and left alone',
      ),
    no_upgrade_path_count: z.number().int(),
  })
  .meta({ id: 'UpgradePaths' });

/** Updates held by a device lock or a site freeze (docs/ota.md "Update locks"). */
export const HeldSchema = z
  .object({
    count: z.number().int(),
    reasons: z
      .partialRecord(z.enum(HOLD_REASONS), z.number().int())
      .describe('Held updates per reason: emergency_test, recharging, occupied, other (device locks), site_frozen'),
    serials: z.array(z.string()).describe(`The first ${HELD_SAMPLE} serials held, by serial`),
  })
  .meta({ id: 'HeldUpdates' });

/** Bytes sent against full images (docs/ota.md "Delta images"). */
export const DeploymentTransferSchema = z
  .object({
    bytes_sent: z
      .number()
      .int()
      .describe(
        'Per update whose command went out: the size of the delta it was offered, or of the full image (both for one that fell back from its delta)',
      ),
    full_image_bytes: z.number().int().describe('The full images of the same updates: what was sent without deltas'),
    delta_updates: z.number().int().describe('Updates offered a delta that did not fall back to the full image'),
  })
  .meta({ id: 'DeploymentTransfer' });

export const DeploymentSchema = z
  .object({
    id: z.string(),
    kind: z.enum(DEPLOYMENT_KINDS),
    model: z.string(),
    firmware_version_id: z.string(),
    target_version: z.string(),
    status: z
      .enum(DEPLOYMENT_STATUSES)
      .describe(
        'completed: every device it kept installed the version; completed_with_failures: some did not; superseded: newer deployments took over every target before it was sent, so it installed nothing (docs/ota.md "Staged rollout", Completion)',
      ),
    filter: z.record(z.string(), z.unknown()),
    rollout: z.record(z.string(), z.unknown()).nullable(),
    respect_maintenance_window: z.boolean(),
    target_count: z.number().int(),
    counts: DeploymentCountsSchema,
    failure_codes: z
      .array(
        z.object({
          code: z.enum(OTA_ERROR_CODES).nullable().describe('null: the device reported no error_code'),
          count: z.number().int(),
        }),
      )
      .describe(
        'Failed and rolled-back updates per error_code the devices reported (docs/device-protocol.md "Error codes"), most frequent first',
      ),
    progress_percent: z
      .number()
      .min(0)
      .max(100)
      .describe(
        'Share (0-100, one decimal) of the targets that installed the version (counts.succeeded); failed, timed-out, rolled-back and cancelled updates do not count. Targets a newer deployment took over (superseded) are left out; 0 when every target was superseded, 100 for a deployment without targets',
      ),
    current_batch: z.number().int(),
    batch_count: z.number().int(),
    paused_reason: z.string().nullable(),
    parent_deployment_id: z.string().nullable(),
    created_by: z.string().nullable(),
    scheduled_at: z.string().nullable(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
    held: HeldSchema.describe(
      'Queued updates held now by a device lock or a site freeze: not sent, no deadline, never a failure; sent once the hold ends',
    ),
    transfer: DeploymentTransferSchema.describe('Bytes sent to devices against full-image bytes (delta images)'),
  })
  .meta({ id: 'Deployment' });

export const DeviceUpdateSchema = z
  .object({
    serial: z.string(),
    job_id: z.string(),
    state: z.enum(UPDATE_STATES),
    progress: z.number().int(),
    from_version: z.string().nullable(),
    target_version: z.string(),
    error: z.string().nullable(),
    error_code: z
      .enum(OTA_ERROR_CODES)
      .nullable()
      .describe('With failed and rolled_back: the reason the device reported (docs/device-protocol.md "Error codes")'),
    batch: z.number().int(),
    attempts: z.number().int(),
    superseded_by: z.string().nullable(),
    health_failed: z.boolean(),
    final_version: z
      .string()
      .nullable()
      .describe(
        "Upgrade paths: the version the device's path ends at (target_version is the current hop); null for a one-hop update",
      ),
    hop: z.number().int().nullable().describe("This hop's number in the path (1 = first); null for a one-hop update"),
    hop_count: z.number().int().nullable().describe('Hops in the path as planned; null for a one-hop update'),
    sent_at: z.string().nullable(),
    state_changed_at: z.string(),
    finished_at: z.string().nullable(),
    held: z
      .object({ reason: z.enum(HOLD_REASONS), until: z.string().nullable() })
      .nullable()
      .describe('A queued update held now (device lock or site freeze): why, and until when; null otherwise'),
  })
  .meta({ id: 'DeviceUpdate' });

export const DeployAcceptedSchema = z
  .object({
    deployment_id: z.string(),
    target_count: z.number().int(),
    status: z.enum(DEPLOYMENT_STATUSES),
    status_url: z.string(),
    deployment: DeploymentSchema,
  })
  .meta({ id: 'DeployAccepted' });

export const DeployDryRunSchema = z
  .object({
    dry_run: z.literal(true),
    target_count: z.number().int(),
    sample_serials: z.array(z.string()),
    model: z.string(),
    target_version: z.string(),
    held: HeldSchema.describe('Targets held now by a device lock or a site freeze: they are recorded and wait'),
    upgrade_paths: UpgradePathsSchema,
    deltas: z
      .array(
        z.object({
          from_version: z.string(),
          devices: z.number().int(),
          status: z
            .enum(['ready', 'building', 'will_be_built', 'too_large', 'no_gain', 'failed', 'no_source_image'])
            .describe(
              'ready: built (delta_size); building / will_be_built: not yet (the dry run starts the build); too_large: an image is above DELTA_MAX_IMAGE_BYTES; no_gain: not smaller than the image; failed: the build failed; no_source_image: the running version has no binary here. Without a ready delta devices get the full image',
            ),
          delta_size: z.number().int().nullable(),
          full_size: z.number().int(),
        }),
      )
      .describe(
        'Per version the targets run (most devices first): the delta to the target version, against the full image (docs/ota.md "Delta images")',
      ),
  })
  .meta({ id: 'DeployDryRun' });
