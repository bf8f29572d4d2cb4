import { z } from 'zod';
import { DEPLOYMENT_KINDS, DEPLOYMENT_STATUSES, UPDATE_STATES } from '#core/deployments/deployment-types';

/** Wire format (snake_case) of firmware versions and deployments. */
export const FirmwareVersionSchema = z
  .object({
    id: z.string(),
    model: z.string(),
    version: z.string(),
    release_notes: z.string(),
    changelog: z.string(),
    size: z.number().int().describe('Bytes'),
    sha256: z.string(),
    file_available: z.boolean().describe('False once the binary was deleted (the record stays)'),
    signed: z.boolean().describe('Uploaded with a signature that verified with the account signing key of the time'),
    key_id: z
      .string()
      .nullable()
      .describe('Signing key the version was signed with (null when unsigned); OTA commands carry it'),
    signature: z
      .string()
      .nullable()
      .describe('base64 Ed25519 signature over the 32-byte SHA-256 digest of the binary (null when unsigned)'),
    created_at: z.string(),
  })
  .meta({ id: 'FirmwareVersion' });

export const SigningKeySchema = z
  .object({
    key_id: z.string().describe('First 16 hex digits of SHA-256 over the public key in SPKI DER form'),
    algorithm: z.literal('ed25519'),
    public_key: z.string().describe('PEM (SubjectPublicKeyInfo)'),
    created_at: z.string(),
    retired_at: z.string().nullable().describe('When a newer key replaced it; versions it signed stay valid'),
  })
  .meta({ id: 'FirmwareSigningKey' });

export const SigningKeysSchema = z
  .object({
    signing_key: SigningKeySchema.nullable().describe(
      'The key uploads must be signed with now; null when none is registered (uploads are unsigned)',
    ),
    retired_keys: z.array(SigningKeySchema).describe('Keys it replaced, newest first'),
  })
  .meta({ id: 'FirmwareSigningKeys' });

export const ListFirmwareQuery = z.strictObject({ model: z.string().min(1).max(64).optional() });

export const FirmwareUploadForm = z
  .object({
    model: z.string().describe('Registered model name'),
    version: z.string().describe('Dotted version: 1.4, 1.4.2, 1.4.2.7, 2.0.0-rc.1'),
    release_notes: z.string().optional(),
    changelog: z.string().optional(),
    signature: z
      .string()
      .optional()
      .describe(
        'base64 Ed25519 signature over the 32-byte SHA-256 digest of the file; required once a signing key is registered',
      ),
    file: z.string().describe('The binary (format: binary)'),
  })
  .meta({ id: 'FirmwareUpload' });

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
    status: z.enum(DEPLOYMENT_STATUSES),
    filter: z.record(z.string(), z.unknown()),
    rollout: z.record(z.string(), z.unknown()).nullable(),
    respect_maintenance_window: z.boolean(),
    target_count: z.number().int(),
    counts: DeploymentCountsSchema,
    progress_percent: z
      .number()
      .min(0)
      .max(100)
      .describe(
        'Share (0-100, one decimal) of the targets whose update reached a final state; targets a newer deployment took over (superseded) are left out',
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
