import { z } from 'zod';
import {
  DEPLOYMENT_KINDS,
  DEPLOYMENT_STATUSES,
  ROLLOUT_RULES,
  UPDATE_STATES,
} from '#core/deployments/deployment-types';
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
      })
      .default({}),
    serials: DeploySerials.optional(),
    rollout: RolloutBody.optional(),
    respect_maintenance_window: z.boolean().default(false),
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
  state: z.enum([...UPDATE_STATES, 'superseded']).optional(),
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
  })
  .meta({ id: 'DeploymentCounts' });

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
    sent_at: z.string().nullable(),
    state_changed_at: z.string(),
    finished_at: z.string().nullable(),
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
  })
  .meta({ id: 'DeployDryRun' });
