import { z } from 'zod';

/**
 * Credentials rotation payloads (docs/device-protocol.md "Credentials rotation"): what the
 * service delivers on `devices/{serial}/credentials`, how the device confirms it on
 * `credentials/ack`, and the certificate signing request it may send on `csr`.
 */

/** A PEM CSR as a device sends it: the whole message stays within the 4 KB device payload limit. */
export const MAX_DEVICE_CSR_CHARS = 4000;

/** Grace period of a planned password rotation when the request names none (seconds): 7 days. */
export const DEFAULT_ROTATION_GRACE_S = 7 * 86_400;
/** Shortest grace period a planned rotation may ask for (seconds): 1 hour. */
export const MIN_ROTATION_GRACE_S = 3_600;
/** Longest grace period a planned rotation may ask for (seconds): 30 days. */
export const MAX_ROTATION_GRACE_S = 30 * 86_400;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const RotationId = z
  .string()
  .regex(UUID)
  .meta({ description: 'The rotation this delivery belongs to (a lowercase UUID); echo it in the ack.' });
/** What the service sends: `Date.toISOString()`, always UTC with milliseconds. */
const Instant = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
  .meta({ description: 'ISO 8601 UTC, e.g. 2026-12-04T10:00:00.000Z.' });

const PasswordDelivery = z
  .strictObject({
    type: z.literal('password'),
    rotation_id: RotationId,
    username: z.string().min(1).max(64).meta({ description: 'The serial (unchanged).' }),
    password: z.string().min(1).max(256).meta({ description: 'The new MQTT password.' }),
    grace_ends_at: Instant.meta({
      description: 'Until then the previous password is accepted too (unless the device confirms first).',
    }),
  })
  .meta({ id: 'PasswordDelivery' });

const CertificateDelivery = z
  .strictObject({
    type: z.literal('certificate'),
    rotation_id: RotationId,
    certificate: z.string().min(1).meta({ description: 'PEM of the new client certificate (subject CN = serial).' }),
    fingerprint_sha256: z.string().regex(/^[0-9a-f]{64}$/),
    not_after: Instant,
    grace_ends_at: Instant.meta({
      description:
        'Until then the previous certificate is accepted too (unless the device connects with the new one first).',
    }),
  })
  .meta({ id: 'CertificateDelivery' });

/** Service to device (strict: the service never sends anything else). */
export const CredentialsMessage = z.discriminatedUnion('type', [PasswordDelivery, CertificateDelivery]).meta({
  id: 'CredentialsMessage',
  description:
    'devices/{serial}/credentials (QoS 1, never retained, delivered only over a connected session): a new password, or the certificate issued from the CSR the device sent.',
});
export type CredentialsMessage = z.infer<typeof CredentialsMessage>;

export const CredentialsAck = z.object({ rotation_id: z.string().regex(UUID) }).meta({
  id: 'CredentialsAck',
  description:
    'devices/{serial}/credentials/ack: the device stored what it received on `credentials` (same `rotation_id`). For a password, the previous one stops working.',
});
export type CredentialsAck = z.infer<typeof CredentialsAck>;

export const CertificateRequest = z.object({ csr: z.string().min(1).max(MAX_DEVICE_CSR_CHARS) }).meta({
  id: 'CertificateRequest',
  description:
    'devices/{serial}/csr: a PEM PKCS#10 request whose subject CN is the serial; answered with a certificate on `credentials`.',
});
export type CertificateRequest = z.infer<typeof CertificateRequest>;

/**
 * How a device reads `credentials`: fields it does not know are ignored (newer services may add
 * some); null for anything that is not a delivery it can use.
 */
export function readCredentialsMessage(payload: Buffer | string): CredentialsMessage | null {
  let json: unknown;
  try {
    json = JSON.parse(typeof payload === 'string' ? payload : payload.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof json !== 'object' || json === null) return null;
  const type = (json as { type?: unknown }).type;
  const known = type === 'password' ? PasswordDelivery : type === 'certificate' ? CertificateDelivery : null;
  if (!known) return null;
  const fields = Object.fromEntries(Object.entries(json).filter(([key]) => key in known.shape));
  const parsed = CredentialsMessage.safeParse(fields);
  return parsed.success ? parsed.data : null;
}
