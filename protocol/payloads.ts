import { z } from 'zod';
import { MAX_VERSION_LENGTH, VERSION_PATTERN } from './version';
import { IPV6_PATTERN } from './ip-address';

/**
 * Device protocol v1 payloads as zod schemas: the broker validates with them, the simulator
 * builds with them, the tests and docs/device-protocol.md (JSON Schema via z.toJSONSchema) are
 * generated from them. Unknown fields in device messages are ignored (stripped), so newer
 * firmware can add telemetry without being refused by an older service.
 */

/** Largest payload the service accepts from a device (bytes). Larger ones are dropped and counted. */
export const MAX_DEVICE_PAYLOAD_BYTES = 4096;

/** Per-device publish limit: a token bucket of this many messages per second sustained... */
export const FLOOD_RATE_PER_S = 20;
/** ...with this burst. Messages above it are dropped and counted. */
export const FLOOD_BURST = 50;
/** A device that exceeds the limit by this many dropped messages within FLOOD_WINDOW_S is disconnected. */
export const FLOOD_DISCONNECT_AFTER_DROPS = 200;
export const FLOOD_WINDOW_S = 10;

/**
 * A publish the topic ACL refuses is acknowledged and dropped (never a reason to close, so a
 * clean=false client does not resend it after every reconnect). Only a flood of them closes the
 * connection: a refused publish beyond REFUSED_PUBLISH_LIMIT within REFUSED_PUBLISH_WINDOW_S.
 */
export const REFUSED_PUBLISH_LIMIT = 20;
export const REFUSED_PUBLISH_WINDOW_S = 60;

/**
 * The keepalive range of the contract (seconds). The broker refuses no connection for its
 * keepalive: 0 (no keepalive) and anything above KEEPALIVE_MAX_S are served as KEEPALIVE_MAX_S,
 * so a dead connection is always closed after 1.5 x KEEPALIVE_MAX_S of silence.
 */
export const KEEPALIVE_MIN_S = 10;
export const KEEPALIVE_MAX_S = 1200;

const Firmware = z
  .string()
  .min(1)
  .max(MAX_VERSION_LENGTH)
  // A regex, not a refinement: zod publishes it as the JSON Schema's `pattern`.
  .regex(VERSION_PATTERN, 'must be a dotted version of 1 to 4 numeric parts (1.4.2, 1.4.2.7, 2.0.0-rc.1)')
  .meta({
    description:
      'Dotted version: 1 to 4 numeric parts, optional pre-release and build (1.4, 1.4.2, 1.4.2.7, 2.0.0-rc.1).',
  });

/**
 * Every field is optional (a wired module has no `rssi`; `{}` is a plain sign of life); what is
 * absent keeps its last value. The service reads a heartbeat field by field
 * (protocol/heartbeat-fields.ts): a field that fails its schema is refused and counted on its own,
 * the others are recorded. This whole-object schema is what the JSON Schema publishes: a
 * heartbeat it accepts has no refused field.
 */
export const Heartbeat = z
  .object({
    firmware: Firmware.optional(),
    ip: z
      .union([
        z.ipv4({ message: 'must be an IPv4 address' }),
        // zod checks IPv6 with the URL parser; the pattern it publishes must say the same (ip-address.ts).
        z.ipv6({ message: 'must be an IPv6 address' }).meta({ pattern: IPV6_PATTERN.source }),
      ])
      .optional()
      .meta({
        description: 'IPv4 (10.0.4.17) or IPv6 (2001:db8::17, fe80::1, ::ffff:10.0.4.17; no zone, no brackets).',
      }),
    uptime_s: z.number().int().min(0).max(2_147_483_647).optional(),
    // Fractions are accepted and rounded to the nearest integer dBm (an averaged reading is common).
    rssi: z
      .number()
      .min(-150)
      .max(0)
      .transform((v) => Math.round(v))
      .optional()
      .meta({ description: 'dBm, -150..0; a fraction is rounded to the nearest integer.' }),
  })
  .meta({
    id: 'Heartbeat',
    description:
      'devices/{serial}/heartbeat: latest telemetry, each field optional (absent ones keep their last value); also proves the device is alive.',
  });
export type Heartbeat = z.infer<typeof Heartbeat>;

export const StatusMessage = z
  .object({ state: z.enum(['online', 'offline']) })
  .meta({ id: 'StatusMessage', description: 'devices/{serial}/status, also the Last Will ({"state":"offline"}).' });
export type StatusMessage = z.infer<typeof StatusMessage>;

export const OTA_PROGRESS_STATES = [
  'downloading',
  'installing',
  'rebooting',
  'succeeded',
  'failed',
  'rolled_back',
] as const;

/**
 * Why an update failed, as a module reports it with `failed` or `rolled_back`
 * (docs/device-protocol.md "OTA", "Error codes"). Stored with the device's update and counted
 * per deployment so dashboards can group failures. Persisted values: never rename one.
 */
export const OTA_ERROR_CODES = [
  'download',
  'size_mismatch',
  'digest_mismatch',
  'signature',
  'wrong_model',
  'flash_write',
  'low_power',
  'boot_failed',
  'timeout',
  'other',
  // The module could not apply the command's `delta` (no room, unknown format, corrupt, result
  // digest wrong): the service sends the same job again with the full image only, once.
  'delta_apply',
] as const;
export type OtaErrorCode = (typeof OTA_ERROR_CODES)[number];

export const OtaProgress = z
  .object({
    job_id: z.string().min(1).max(64),
    state: z.enum(OTA_PROGRESS_STATES),
    progress: z.number().int().min(0).max(100).optional(),
    error: z.string().max(500).optional(),
    error_code: z.enum(OTA_ERROR_CODES).optional().meta({
      description:
        'With `failed` and `rolled_back`: why, from a fixed vocabulary. A code the service does not know is recorded as `other` (the report is not refused).',
    }),
  })
  .meta({
    id: 'OtaProgress',
    description:
      'devices/{serial}/ota/progress: a step of an OTA job; `error_code` and `error` with `failed` and `rolled_back`.',
  });
export type OtaProgress = z.infer<typeof OtaProgress>;

/**
 * What the broker parses a progress report with: OtaProgress, except that `error_code` is read
 * on its own (readOtaErrorCode). A newer module may know codes this service does not: its report
 * must still move the update on, so an unknown code is recorded as `other` and counted, never a
 * reason to drop the report.
 */
export const ReceivedOtaProgress = OtaProgress.extend({ error_code: z.unknown().optional() });
export type ReceivedOtaProgress = z.infer<typeof ReceivedOtaProgress>;

/** `error_code` as received: a code of the vocabulary, `other` for anything else (`unknown`), or none. */
export function readOtaErrorCode(value: unknown): { code: OtaErrorCode | undefined; unknown: boolean } {
  if (value === undefined || value === null) return { code: undefined, unknown: false };
  const known = typeof value === 'string' && (OTA_ERROR_CODES as readonly string[]).includes(value);
  return known ? { code: value as OtaErrorCode, unknown: false } : { code: 'other', unknown: true };
}

/** A configuration version, the same range in both directions (a PostgreSQL `integer`). */
const ConfigVersion = z.number().int().min(1).max(2_147_483_647);

export const ConfigReported = z.object({ version: ConfigVersion }).meta({
  id: 'ConfigReported',
  description: 'devices/{serial}/config/reported: the configuration version the device applied.',
});
export type ConfigReported = z.infer<typeof ConfigReported>;

/**
 * Largest payload the service sends on each service-to-device topic (bytes): a module sizes its
 * receive buffer from these (the whole PUBLISH packet adds at most 128 bytes of topic and
 * headers). The service refuses to send anything larger; the schemas' bounds keep the largest
 * possible message under them with room for fields still to come (test/unit/protocol-limits.test.ts).
 */
export const MAX_OTA_COMMAND_BYTES = 2048;
export const MAX_CONFIG_MESSAGE_BYTES = 1024;
/** Longest download link in an OTA command (PUBLIC_URL plus about 125 characters of path and signature). */
export const MAX_OTA_URL_LENGTH = 1024;

/** The delta formats a command may offer (docs/ota.md "Delta images"); a module that knows none of them ignores `delta`. */
export const DELTA_FORMATS = ['bsdiff40'] as const;

/**
 * A binary delta next to the full image of an OTA command (docs/device-protocol.md "Delta
 * images"). Optional for a module: one that does not know the field downloads `url` as always.
 * `sha256` and `size` are the delta file's; the command's own `sha256`, `size` and `signature`
 * stay those of the full target image, which the module checks after applying the delta.
 */
export const OtaDelta = z
  .object({
    from: Firmware.meta({
      description: 'The version the delta applies to: a module running another version ignores the delta.',
    }),
    url: z.url({ protocol: /^https?$/ }).max(MAX_OTA_URL_LENGTH),
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .meta({ description: 'SHA-256 of the delta file (not of the image it produces).' }),
    size: z.number().int().min(0).meta({ description: 'Size of the delta file in bytes.' }),
    format: z.enum(DELTA_FORMATS),
  })
  .meta({
    id: 'OtaDelta',
    description:
      "A delta from the running version `from` to the command's image: download it, apply it to the running image, then check the result against the command's sha256 and signature before installing.",
  });
export type OtaDelta = z.infer<typeof OtaDelta>;

/**
 * Service to device. Open in the published JSON Schema (no `additionalProperties: false`): new
 * fields will come, and a module ignores the fields it does not know. The service itself builds
 * every message with the strict form (`.strict()` in broker/src/device-messages.ts), so it sends
 * nothing this schema does not name. `signature` and `key_id` come together, with every command
 * of a version uploaded signed (docs/device-protocol.md "Signed firmware"); versions uploaded
 * before the account registered a key have neither.
 */
export const OtaCommand = z
  .object({
    job_id: z.string().min(1).max(64),
    version: Firmware,
    model: z.string().min(1).max(64).meta({
      description:
        'The fixture model the image is built for (its name as registered). A module whose own model differs refuses the command (error_code `wrong_model`).',
    }),
    url: z.url({ protocol: /^https?$/ }).max(MAX_OTA_URL_LENGTH),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    size: z.number().int().min(0),
    signature: z
      .string()
      .regex(/^[A-Za-z0-9+/]{86}==$/)
      .optional()
      .meta({ description: 'base64 Ed25519 signature (64 bytes) over the raw 32-byte SHA-256 digest of the image.' }),
    key_id: z
      .string()
      .regex(/^[0-9a-f]{16}$/)
      .optional()
      .meta({ description: 'The signing key: first 16 hex digits of SHA-256 over the public key in SPKI DER form.' }),
    delta: OtaDelta.optional(),
  })
  .refine((c) => (c.signature === undefined) === (c.key_id === undefined), {
    message: 'signature and key_id come together',
    path: ['key_id'],
  })
  .meta({
    id: 'OtaCommand',
    description:
      'devices/{serial}/ota: install this firmware (check model, download, verify size, sha256 and the signature when there is one, install, reboot). Fields a device does not know it ignores.',
    // The refinement above, for readers of the JSON Schema (zod does not translate refinements).
    dependentRequired: { signature: ['key_id'], key_id: ['signature'] },
  });
export type OtaCommand = z.infer<typeof OtaCommand>;

/**
 * Service to device, open like OtaCommand (a module ignores what it does not know; the service
 * builds it strict). Always the whole configuration, never a delta.
 */
export const ConfigMessage = z
  .object({
    version: ConfigVersion,
    config: z.record(z.string(), z.unknown()).meta({
      description:
        'The whole desired configuration (never a delta): heartbeat_interval_s, dim_level, power_on_level, timezone, maintenance_window, luminaire_interval_s.',
    }),
    server_time: z.iso.datetime().meta({
      description:
        "The service's clock when the message was sent (ISO 8601, UTC): a module without a real-time clock may set its clock from it. Not authenticated on a plain connection.",
    }),
  })
  .meta({
    id: 'ConfigMessage',
    description:
      'devices/{serial}/config: the desired configuration and its version, sent once on each connection and on every change.',
  });
export type ConfigMessage = z.infer<typeof ConfigMessage>;

/** Parses a device payload: size limit, UTF-8 JSON object, then the schema. */
export function parsePayload<T>(
  schema: z.ZodType<T>,
  payload: Buffer | string,
): { ok: true; value: T } | { ok: false; reason: 'too_large' | 'not_json' | 'invalid' } {
  const size = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
  if (size > MAX_DEVICE_PAYLOAD_BYTES) return { ok: false, reason: 'too_large' };
  let json: unknown;
  try {
    json = JSON.parse(typeof payload === 'string' ? payload : payload.toString('utf8'));
  } catch {
    return { ok: false, reason: 'not_json' };
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, reason: 'invalid' };
}
