import { z } from 'zod';
import { RegisterSigningKeyInput } from '#core/firmware/signing-key.service';

/** Wire schemas (snake_case) of the firmware routes: versions, the upload form and the signing keys. */
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
    signed: z
      .boolean()
      .describe(
        'Carries a signature that verified with the account signing key of the time (at upload, or attached later with PUT .../signature)',
      ),
    key_id: z
      .string()
      .nullable()
      .describe('Signing key the version was signed with (null when unsigned); OTA commands carry it'),
    signature: z
      .string()
      .nullable()
      .describe('base64 Ed25519 signature over the 32-byte SHA-256 digest of the binary (null when unsigned)'),
    upgrade_from: z
      .string()
      .nullable()
      .describe(
        'The versions that may install this one directly, a semver-style range over our versions (">=1.2.0 <2.0.0", "^1.4", "1.2.x || 1.3.x"); null: any. Devices outside it get a planned path (docs/ota.md "Upgrade paths")',
      ),
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

/** PUT /firmware/signing-key; the route translates it into the domain's RegisterSigningKeyInput. */
export const RegisterSigningKeyBody = z.strictObject({
  public_key: RegisterSigningKeyInput.shape.publicKey,
});

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
    upgrade_from: z
      .string()
      .optional()
      .describe('Range of versions that may install this one directly (">=1.2.0 <2.0.0", "^1.4"); absent or "*": any'),
    file: z.string().describe('The binary (format: binary)'),
  })
  .meta({ id: 'FirmwareUpload' });
