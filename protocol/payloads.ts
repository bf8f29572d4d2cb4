import { z } from 'zod';
import { isValidVersion, MAX_VERSION_LENGTH } from './version';

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

const Firmware = z
  .string()
  .min(1)
  .max(MAX_VERSION_LENGTH)
  .refine(isValidVersion, 'must be a dotted version of 1 to 4 numeric parts (1.4.2, 1.4.2.7, 2.0.0-rc.1)')
  .meta({
    description:
      'Dotted version: 1 to 4 numeric parts, optional pre-release and build (1.4, 1.4.2, 1.4.2.7, 2.0.0-rc.1).',
  });

/**
 * Every field is optional (a wired module has no `rssi`; `{}` is a plain sign of life): what is
 * present must be valid, or the whole message is dropped; what is absent keeps its last value.
 */
export const Heartbeat = z
  .object({
    firmware: Firmware.optional(),
    ip: z.ipv4({ message: 'must be a dotted IPv4 address' }).optional(),
    uptime_s: z.number().int().min(0).max(2_147_483_647).optional(),
    rssi: z.number().int().min(-150).max(0).optional(),
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

export const OtaProgress = z
  .object({
    job_id: z.string().min(1).max(64),
    state: z.enum(OTA_PROGRESS_STATES),
    progress: z.number().int().min(0).max(100).optional(),
    error: z.string().max(500).optional(),
  })
  .meta({
    id: 'OtaProgress',
    description: 'devices/{serial}/ota/progress: a step of an OTA job; `error` with `failed` and `rolled_back`.',
  });
export type OtaProgress = z.infer<typeof OtaProgress>;

export const ConfigReported = z.object({ version: z.number().int().min(1).max(2_147_483_647) }).meta({
  id: 'ConfigReported',
  description: 'devices/{serial}/config/reported: the configuration version the device applied.',
});
export type ConfigReported = z.infer<typeof ConfigReported>;

/**
 * Service to device (strict: the service never sends anything else). `signature` and `key_id`
 * come together, with every command of a version uploaded signed (docs/device-protocol.md
 * "Signed firmware"); versions uploaded before the account registered a key have neither.
 */
export const OtaCommand = z
  .strictObject({
    job_id: z.string().min(1).max(64),
    version: Firmware,
    url: z.url({ protocol: /^https?$/ }),
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
  })
  .refine((c) => (c.signature === undefined) === (c.key_id === undefined), {
    message: 'signature and key_id come together',
    path: ['key_id'],
  })
  .meta({
    id: 'OtaCommand',
    description:
      'devices/{serial}/ota: install this firmware (download, verify sha256 and the signature when there is one, install, reboot).',
    // The refinement above, for readers of the JSON Schema (zod does not translate refinements).
    dependentRequired: { signature: ['key_id'], key_id: ['signature'] },
  });
export type OtaCommand = z.infer<typeof OtaCommand>;

export const ConfigMessage = z
  .strictObject({
    version: z.number().int().min(1),
    config: z.record(z.string(), z.unknown()),
  })
  .meta({
    id: 'ConfigMessage',
    description: 'devices/{serial}/config (retained): the desired configuration and its version.',
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
