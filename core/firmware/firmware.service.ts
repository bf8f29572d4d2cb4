import { z } from 'zod';
import type { Readable } from 'node:stream';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { isUuid, newId } from '../shared/ids';
import { requireVersion, versionKey } from '../shared/version';
import type { ModelService } from '../models/model.service';
import type { FirmwareStorage, StoredTemp } from './firmware-storage';
import type { SigningKeyService } from './signing-key.service';
import { parseVersionRange } from './version-range';
import { attachedSignature, sameSignature, uploadSignature } from './firmware-signature';
import {
  clearStorageKey,
  findFirmwareVersion,
  insertFirmwareVersion,
  isTargetOfUnfinishedUpdates,
  listFirmwareVersions,
  lockFirmwareVersion,
  saveSignature,
  saveUpgradeFrom,
  versionWithKey,
  type FirmwareVersionRecord,
} from './store/firmware-versions.store';

/** A range in semver range syntax over our versions (version-range.ts), checked with its own message. */
const UpgradeFromField = z
  .string()
  .max(256)
  .superRefine((value, ctx) => {
    const parsed = parseVersionRange(value);
    if (!parsed.ok)
      ctx.addIssue({
        code: 'custom',
        message: `is not a version range (e.g. ">=1.2.0 <2.0.0", "^1.4"): ${parsed.message}`,
      });
  });

/** Stored form: trimmed; `*` and an absent range mean the same (any version) and are stored as null. */
function normalizeUpgradeFrom(value: string | null | undefined): string | null {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' || trimmed === '*' ? null : trimmed;
}

export const UploadFirmwareFields = z.strictObject({
  model: z.string().min(1).max(64),
  version: z.string().min(1).max(64),
  release_notes: z
    .string()
    .max(64 * 1024)
    .default(''),
  changelog: z
    .string()
    .max(256 * 1024)
    .default(''),
  /** base64 Ed25519 signature over the binary's 32-byte SHA-256 digest; required once the account registered a signing key. */
  signature: z.string().optional(),
  upgrade_from: UpgradeFromField.optional(),
});
export type UploadFirmwareFields = z.input<typeof UploadFirmwareFields>;

/** PATCH of a firmware version: `upgrade_from` null (or `*`) allows any version again. */
export const UpdateFirmwareInput = z.strictObject({
  upgrade_from: UpgradeFromField.nullable(),
});
export type UpdateFirmwareInput = z.input<typeof UpdateFirmwareInput>;

export const AttachSignatureInput = z.strictObject({
  signature: z
    .string()
    .max(1024)
    .describe(
      "base64 Ed25519 signature over the version's raw 32-byte SHA-256 digest, by the account's current signing key (88 characters; whitespace ignored)",
    ),
});
export type AttachSignatureInput = z.input<typeof AttachSignatureInput>;

export interface FirmwareVersion {
  id: string;
  modelId: string;
  model: string;
  version: string;
  releaseNotes: string;
  changelog: string;
  size: number;
  sha256: string;
  /** False once the binary was deleted (the record stays: rollbacks can say the file is gone). */
  fileAvailable: boolean;
  /** Carries a signature that verified with the account's signing key of the time (at upload, or attached later). */
  signed: boolean;
  /** base64 Ed25519 signature over the SHA-256 digest; null when unsigned. */
  signature: string | null;
  /** The key it was signed with (retired keys stay valid for what they signed). */
  signingKeyId: string | null;
  /** The versions that may install this one directly (docs/ota.md "Upgrade paths"); null: any. */
  upgradeFrom: string | null;
  createdAt: string;
}

export const toFirmwareVersion = (v: FirmwareVersionRecord): FirmwareVersion => ({
  id: v.id,
  modelId: v.modelId,
  model: v.model,
  version: v.version,
  releaseNotes: v.releaseNotes,
  changelog: v.changelog,
  size: v.size,
  sha256: v.sha256,
  fileAvailable: v.storageKey !== null,
  signed: v.signature !== null,
  signature: v.signature,
  signingKeyId: v.signingKeyId,
  upgradeFrom: v.upgradeFrom,
  createdAt: v.createdAt.toISOString(),
});

/** Firmware versions of the account's models and their binaries. */
export class FirmwareService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: {
      models: ModelService;
      storage: FirmwareStorage;
      signingKeys: SigningKeyService;
      maxFirmwareBytes: number;
    },
  ) {}

  get maxFirmwareBytes(): number {
    return this.area.maxFirmwareBytes;
  }

  /**
   * Step 1 of an upload: the binary goes to a temp file (hashed, counted, size-limited) before
   * the fields are checked, because multipart fields may come after the file.
   */
  async receiveFile(actor: Actor, source: Readable): Promise<StoredTemp> {
    requireAdmin(actor);
    return this.area.storage.writeTemp(source, this.area.maxFirmwareBytes);
  }

  /** Drops a received file whose upload failed for another reason. */
  async discardFile(temp: StoredTemp): Promise<void> {
    await this.area.storage.discard(temp);
  }

  /**
   * Step 2: validates the fields and records the version; the temp file becomes its binary.
   * 422 unknown_model / invalid_version, 409 already_exists (`1.4` and `1.4.0` are the same version),
   * 422 signature_invalid (see `verifySignature`). The temp file is removed whenever this throws.
   * The signature is checked only here, once the whole form was read, so the form field may
   * come before or after the file part.
   */
  async create(
    actor: Actor,
    input: { fields: UploadFirmwareFields; file: StoredTemp | null },
  ): Promise<FirmwareVersion> {
    const { file } = input;
    try {
      requireAdmin(actor);
      const fields = UploadFirmwareFields.parse(input.fields);
      if (!file) {
        throw new DomainError('validation_failed', 'The firmware binary is missing.', {
          errors: [{ field: 'file', message: 'is required (multipart file field "file")' }],
        });
      }
      if (file.size === 0) {
        throw new DomainError('validation_failed', 'The firmware binary is empty.', {
          errors: [{ field: 'file', message: 'must not be empty' }],
        });
      }
      requireVersion(fields.version, 'version');
      const model = await this.area.models.requireByName(actor, fields.model);
      const key = versionKey(fields.version);
      const existing = await versionWithKey(this.deps.knex, { modelId: model.id, versionKey: key });
      if (existing !== null) throw alreadyExists(fields.version, model.name, existing);
      // After the cheap field checks, so a mistyped model or version is reported as such.
      const signed = await this.verifySignature(actor, { sha256: file.sha256, signature: fields.signature });
      const id = newId();
      const storageKey = await this.area.storage.commit(file, id);
      const record = {
        id,
        accountId: actor.accountId,
        modelId: model.id,
        version: fields.version,
        versionKey: key,
        releaseNotes: fields.release_notes,
        changelog: fields.changelog,
        size: file.size,
        sha256: file.sha256,
        storageKey,
        signature: signed?.signature ?? null,
        signingKeyId: signed?.keyId ?? null,
        upgradeFrom: normalizeUpgradeFrom(fields.upgrade_from),
        createdAt: this.deps.clock.now(),
      };
      let outcome: 'inserted' | 'duplicate';
      try {
        outcome = await insertFirmwareVersion(this.deps.knex, record);
      } catch (error) {
        await this.area.storage.remove(storageKey);
        throw error;
      }
      if (outcome === 'duplicate') {
        // A concurrent upload of the same version won the unique index.
        await this.area.storage.remove(storageKey);
        throw alreadyExists(fields.version, model.name, fields.version);
      }
      return toFirmwareVersion({ ...record, model: model.name });
    } catch (error) {
      if (file) await this.area.storage.discard(file);
      throw error;
    }
  }

  /** The signature the upload is stored with, under the account's current key (firmware-signature.ts uploadSignature). */
  private async verifySignature(
    actor: Actor,
    input: { sha256: string; signature: string | undefined },
  ): Promise<{ keyId: string; signature: string } | null> {
    const current = await this.area.signingKeys.currentKey({ accountId: actor.accountId });
    return uploadSignature({ current, given: input.signature, sha256: input.sha256 });
  }

  /**
   * Attaches a signature to a stored version (admin): one uploaded before the account registered
   * its signing key, so that deploys and rollbacks to it are allowed (signed-delivery.ts). It must
   * verify with the account's current key over the stored digest, so it works after the binary was
   * deleted; 422 signature_invalid otherwise, and nothing changes. The version's own signature
   * again answers it unchanged (PUT semantics). A version signed with a key since retired gets the
   * new signature only when it verifies with the current key (re-signing after a rotation, for
   * devices that trust only the new key); the OTA commands sent from then on carry it. 404 for
   * another account's version.
   */
  async attachSignature(actor: Actor, raw: { id: string } & AttachSignatureInput): Promise<FirmwareVersion> {
    requireAdmin(actor);
    const input = AttachSignatureInput.parse({ signature: raw.signature });
    if (!isUuid(raw.id)) throw notFound('Firmware version');
    const current = await this.area.signingKeys.currentKey({ accountId: actor.accountId });
    const version = await this.deps.transaction(async (trx) => {
      const found = await lockFirmwareVersion(trx, { accountId: actor.accountId, id: raw.id });
      if (!found) throw notFound('Firmware version');
      if (found.signature !== null && sameSignature(found.signature, input.signature)) return found;
      const signed = attachedSignature({
        current,
        given: input.signature,
        sha256: found.sha256,
        version: found.version,
      });
      await saveSignature(trx, { id: found.id, signature: signed.signature, signingKeyId: signed.keyId });
      return { ...found, signature: signed.signature, signingKeyId: signed.keyId };
    });
    return toFirmwareVersion(version);
  }

  /**
   * Changes what a version allows to install it directly (`upgrade_from`, docs/ota.md "Upgrade
   * paths"); admin; 404 for another account's version, 422 validation_failed for a bad range.
   * Deployments plan with the ranges of the moment they plan (each hop is planned when the one
   * before it succeeded), so a change applies to hops not yet queued.
   */
  async update(actor: Actor, raw: { id: string } & UpdateFirmwareInput): Promise<FirmwareVersion> {
    requireAdmin(actor);
    const input = UpdateFirmwareInput.parse({ upgrade_from: raw.upgrade_from });
    if (!isUuid(raw.id)) throw notFound('Firmware version');
    const upgradeFrom = normalizeUpgradeFrom(input.upgrade_from);
    const version = await this.deps.transaction(async (trx) => {
      const found = await lockFirmwareVersion(trx, { accountId: actor.accountId, id: raw.id });
      if (!found) throw notFound('Firmware version');
      await saveUpgradeFrom(trx, { id: found.id, upgradeFrom });
      return { ...found, upgradeFrom };
    });
    return toFirmwareVersion(version);
  }

  /** Newest version first (by version, not by upload time); optionally one model. */
  async list(actor: Actor, input: { model?: string | undefined } = {}): Promise<FirmwareVersion[]> {
    return (await listFirmwareVersions(this.deps.knex, { accountId: actor.accountId, model: input.model })).map(
      toFirmwareVersion,
    );
  }

  async get(actor: Actor, input: { id: string }): Promise<FirmwareVersion> {
    if (!isUuid(input.id)) throw notFound('Firmware version');
    const found = await findFirmwareVersion(this.deps.knex, { accountId: actor.accountId, id: input.id });
    if (!found) throw notFound('Firmware version');
    return toFirmwareVersion(found);
  }

  /**
   * Deletes the binary; the record stays (storage_key null) so history and rollbacks can name the
   * version and say its file is gone. Refused (409) while an unfinished update targets it.
   */
  async deleteFile(actor: Actor, input: { id: string }): Promise<FirmwareVersion> {
    requireAdmin(actor);
    if (!isUuid(input.id)) throw notFound('Firmware version');
    const { version, storageKey } = await this.deps.transaction(async (trx) => {
      const found = await lockFirmwareVersion(trx, { accountId: actor.accountId, id: input.id });
      if (!found) throw notFound('Firmware version');
      if (await isTargetOfUnfinishedUpdates(trx, input.id)) {
        throw new DomainError(
          'invalid_state',
          `Firmware ${found.version} is the target of unfinished updates; cancel their deployments first.`,
        );
      }
      await clearStorageKey(trx, input.id);
      return { version: { ...found, storageKey: null }, storageKey: found.storageKey };
    });
    if (storageKey) await this.area.storage.remove(storageKey);
    return toFirmwareVersion(version);
  }
}

function alreadyExists(version: string, model: string, existing: string): DomainError {
  return new DomainError(
    'already_exists',
    `Model "${model}" has version ${existing} already${existing !== version ? ` (the same version as ${version})` : ''}.`,
    {
      errors: [{ field: 'version', message: 'exists already for this model' }],
    },
  );
}
