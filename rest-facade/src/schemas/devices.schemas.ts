import { z } from 'zod';
import { LuminaireSummarySchema } from './luminaire.schemas';
import { DeviceHealthSchema } from './health.schemas';
import { DEVICE_STATUSES } from '#core/devices/device-types';
import { MESSAGE_REFUSAL_REASONS } from '#core/devices/device-refusals';
import { FIELD_REFUSAL_REASONS, HEARTBEAT_FIELDS } from '#protocol/heartbeat-fields';
import { MAX_PAGE_SIZE } from '#core/devices/device.service';
import { DEFAULT_ROTATION_GRACE_S, MAX_ROTATION_GRACE_S, MIN_ROTATION_GRACE_S } from '#protocol/credential-payloads';
import { DeviceCertificateSchema } from './certificates.schemas';
import { AllocationSchema } from './allocation.schemas';

/**
 * Wire schemas (snake_case) of the device and claim routes. Request schemas
 * validate at the edge; response schemas document the answers in /api/v1/openapi.json and
 * check them in test/contract/openapi.test.ts.
 */

export const SerialParams = z.object({
  serial: z.string().min(1).max(1024).describe('Device serial (1 to 64 characters of A-Z a-z 0-9 . _ : -)'),
});

export const ListDevicesQuery = z.strictObject({
  model: z.string().min(1).max(64).optional().describe('Registered model name (exact)'),
  status: z.enum(DEVICE_STATUSES).optional(),
  firmware: z.string().min(1).max(64).optional().describe('Installed firmware version (exact string)'),
  firmware_lt: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe(
      'Installed firmware older than this version, compared as versions (1.9.0 < 1.10.0, 2.0.0-rc.1 < 2.0.0). Devices that never reported are not matched.',
    ),
  q: z.string().min(1).max(64).optional().describe('Case-insensitive substring of serial or name'),
  site: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .describe('Site id, or site name (case-insensitive); an unknown site matches nothing'),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_PAGE_SIZE)
    .optional()
    .describe('Page size 1..1000. Without it, every matching device is returned in one streamed document.'),
  cursor: z
    .string()
    .min(1)
    .max(1200)
    .optional()
    .describe('next_cursor of the previous page (requires limit; continues only the same sort)'),
  sort: z
    .enum([
      'serial',
      'name',
      'model',
      'firmware',
      'status',
      'last_seen',
      'ip',
      '-serial',
      '-name',
      '-model',
      '-firmware',
      '-status',
      '-last_seen',
      '-ip',
    ])
    .optional()
    .describe(
      'Order of a paged list (requires limit): a column, descending with a leading `-`; ties broken by serial. Default `serial`. Firmware sorts as versions (1.10.0 after 1.9.0).',
    ),
});
export type ListDevicesQuery = z.infer<typeof ListDevicesQuery>;

export const HistoryQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).optional().describe('Page size 1..1000, default 50'),
  cursor: z.string().min(1).max(200).optional(),
});

// Outputs. Reported configurations come from devices, so their schema allows extra keys.
const ConfigView = z
  .looseObject({
    heartbeat_interval_s: z.number().int().optional(),
    dim_level: z.number().int().optional(),
    power_on_level: z.number().int().optional(),
    timezone: z.string().optional(),
    maintenance_window: z.object({ start: z.string(), end: z.string() }).nullable().optional(),
    luminaire_interval_s: z.number().int().optional(),
  })
  .meta({ id: 'DeviceConfigView' });

export const DeviceCurrentUpdateSchema = z
  .object({
    job_id: z.string(),
    deployment_id: z.string(),
    state: z
      .string()
      .describe(
        'queued, sent, downloading, installing, rebooting, succeeded, failed, timed_out, cancelled, rolled_back',
      ),
    progress: z.number().int(),
    from_version: z.string().nullable(),
    target_version: z.string(),
    error: z.string().nullable(),
    state_changed_at: z.string(),
  })
  .meta({
    id: 'DeviceCurrentUpdate',
    description: "The device's current OTA update (unfinished, else the last one the engine recorded).",
  });

const RefusedMessageCounts = z
  .partialRecord(z.enum(MESSAGE_REFUSAL_REASONS), z.number().int())
  .describe(
    'Messages of the device dropped since its claim, by reason (docs/device-protocol.md "Refused messages and fields"); reasons never seen are absent.',
  );

const LastRefusedMessageSchema = z
  .object({
    reason: z.enum(MESSAGE_REFUSAL_REASONS),
    topic: z.string().describe('The topic it was published on (at most 200 characters)'),
    at: z.string().describe('ISO 8601 UTC'),
  })
  .meta({ id: 'LastRefusedMessage', description: 'The last message of the device the service dropped.' });

const RefusedFieldsSchema = z
  .partialRecord(
    z.enum(HEARTBEAT_FIELDS),
    z.object({
      count: z.number().int().describe('Refusals of this field since the claim'),
      reason: z.enum(FIELD_REFUSAL_REASONS).describe('Why the last one was refused'),
      value: z.string().describe('What the device sent the last time (JSON for a non-string; at most 64 characters)'),
      at: z.string().describe('ISO 8601 UTC of the last one'),
    }),
  )
  .describe(
    'Heartbeat fields refused since the claim (the rest of each heartbeat was recorded); fields never refused are absent.',
  );

export const DeviceSchema = z
  .object({
    serial: z.string(),
    name: z.string(),
    model: z.string(),
    firmware: z.string().nullable().describe('Installed version as last reported; null until the device reports'),
    status: z.enum(DEVICE_STATUSES),
    last_seen: z.string().nullable().describe('ISO 8601 UTC time of the last heartbeat'),
    ip: z.string().nullable(),
    connectivity: z.enum(['online', 'offline']),
    update: DeviceCurrentUpdateSchema.nullable(),
    tags: z.record(z.string(), z.string()),
    config: z.object({
      desired: ConfigView,
      desired_version: z.number().int(),
      reported: ConfigView.nullable(),
      reported_version: z.number().int().nullable(),
      in_sync: z.boolean(),
    }),
    uptime_s: z.number().int().nullable(),
    rssi: z.number().int().nullable(),
    claimed_at: z.string(),
    firmware_reported_invalid: z
      .string()
      .nullable()
      .describe(
        'The last firmware value the device reported outside the version grammar, as sent; null when its last report was a valid version. `firmware` keeps the last valid one meanwhile.',
      ),
    refused_messages: RefusedMessageCounts,
    last_refused_message: LastRefusedMessageSchema.nullable(),
    refused_fields: RefusedFieldsSchema,
    site: z
      .object({ id: z.string(), name: z.string() })
      .nullable()
      .describe('The site (building) the device is assigned to; null when none (docs/ota.md "Sites")'),
    luminaire: LuminaireSummarySchema.nullable()
      .optional()
      .describe(
        'GET /devices/{serial} only (not in lists): latest luminaire values, burn hours, lifetime energy; null until the first reading (docs/luminaire-data.md)',
      ),
    health: DeviceHealthSchema.nullable()
      .optional()
      .describe(
        'GET /devices/{serial} only (not in lists): fixture health state and its reasons; null until the health pass judged the device (docs/fixture-health.md)',
      ),
  })
  .meta({ id: 'Device' });

export const DeviceListSchema = z
  .object({
    devices: z.array(DeviceSchema),
    total: z.number().int().describe('Devices matching the filter (all pages)'),
    quota: z.number().int(),
    next_cursor: z
      .string()
      .nullable()
      .optional()
      .describe('Paged form only: cursor of the next page, null on the last'),
  })
  .meta({ id: 'DeviceList' });

export const CredentialsSchema = z
  .object({
    serial: z.string(),
    username: z.string(),
    password: z.string().describe('Shown once; stored only as a SHA-256 digest'),
  })
  .meta({ id: 'DeviceCredentials' });

/**
 * `POST /devices/:serial/credentials`. Without a body (or `mode: "emergency"`): the emergency
 * rotation. `mode: "in_band"`: the planned rotation, with `grace_s`.
 */
export const RotateCredentialsBody = z
  .strictObject({
    mode: z
      .enum(['emergency', 'in_band'])
      .default('emergency')
      .describe(
        '`emergency` (default, for a leaked secret): a new password now, the old one refused at once and the session closed. `in_band`: the new password is delivered to the device over its MQTT session; both work until the device confirms it or `grace_s` passes.',
      ),
    grace_s: z
      .number()
      .int()
      .min(MIN_ROTATION_GRACE_S)
      .max(MAX_ROTATION_GRACE_S)
      .optional()
      .describe(
        `in_band only: seconds the old password keeps working unless the device confirms first; ${MIN_ROTATION_GRACE_S}..${MAX_ROTATION_GRACE_S}, default ${DEFAULT_ROTATION_GRACE_S} (7 days).`,
      ),
  })
  .refine((b) => b.mode === 'in_band' || b.grace_s === undefined, {
    message: 'only with mode in_band',
    path: ['grace_s'],
  });
export type RotateCredentialsBody = z.infer<typeof RotateCredentialsBody>;

export const CredentialRotationSchema = z
  .object({
    serial: z.string(),
    username: z.string(),
    mode: z.literal('in_band'),
    rotation: z.object({
      id: z
        .string()
        .describe('Named again by the device when it confirms (credentials/ack), and in the history and the event'),
      kind: z.literal('password'),
      state: z.literal('pending'),
      created_at: z.string(),
      grace_ends_at: z.string().describe('From then on only the new password is accepted'),
    }),
  })
  .meta({
    id: 'DeviceCredentialRotation',
    description:
      'A planned rotation: the new password goes to the device over its MQTT session and is never shown here. `device.credentials_rotated` (webhook) and the history tell when it took effect.',
  });

export const ClaimResponseSchema = z
  .object({
    claimed: z.number().int(),
    devices: z.array(
      DeviceSchema.extend({
        credentials: z.object({ username: z.string(), password: z.string() }),
        certificate: DeviceCertificateSchema.optional().describe(
          'Signed from the CSR the claim carried for this device (`csrs`); absent without one',
        ),
      }),
    ),
    deployment_id: z
      .string()
      .nullable()
      .describe('Deployment installing the requested firmware once each device connects; null when none'),
    charged: z.object({ amount: z.number(), currency: z.string() }),
    allocation: AllocationSchema,
  })
  .meta({ id: 'ClaimResponse' });

export const HistorySchema = z
  .object({
    events: z.array(
      z.object({
        id: z.number().int(),
        type: z.string(),
        occurred_at: z.string(),
        data: z.record(z.string(), z.unknown()),
      }),
    ),
    next_cursor: z.string().nullable(),
  })
  .meta({ id: 'DeviceHistory' });
