import { z } from 'zod';
import { REVOCATION_REASONS } from '#core/certificates/device-certificate-types';

/** Wire schemas (snake_case) of device certificates: the certificate routes and the claim answer. */

export const DeviceCertificateSchema = z
  .object({
    serial: z.string().describe('The device serial; also the subject CN'),
    certificate: z.string().describe('PEM X.509 certificate, signed by the device CA'),
    fingerprint_sha256: z.string().describe('SHA-256 of the DER certificate, lowercase hex'),
    serial_number: z.string().describe('Certificate serial number, lowercase hex'),
    key_algorithm: z.string().describe('Key type of the CSR: P-256, P-384, P-521, Ed25519 or RSA-<bits>'),
    not_before: z.string().describe('ISO 8601 UTC'),
    not_after: z.string().describe('ISO 8601 UTC'),
    created_at: z.string(),
    revoked_at: z
      .string()
      .nullable()
      .describe('Set once revoked (DELETE, or the device was unclaimed); the broker refuses it from then on'),
    revoked_reason: z.enum(REVOCATION_REASONS).nullable(),
  })
  .meta({ id: 'DeviceCertificate' });

export const DeviceCertificateListSchema = z
  .object({ certificates: z.array(DeviceCertificateSchema).describe('Newest first, revoked ones included') })
  .meta({ id: 'DeviceCertificateList' });
