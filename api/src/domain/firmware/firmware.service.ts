import { z } from 'zod';
import type { Readable } from 'node:stream';
import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { isUuid, newId } from '../shared/ids';
import { requireVersion, versionKey } from '../shared/version';
import type { ModelService } from '../models/model.service';
import type { FirmwareStorage, StoredTemp } from './firmware-storage';

export const UploadFirmwareFields = z.strictObject({
  model: z.string().min(1).max(64),
  version: z.string().min(1).max(64),
  release_notes: z.string().max(64 * 1024).default(''),
  changelog: z.string().max(256 * 1024).default(''),
});
export type UploadFirmwareFields = z.input<typeof UploadFirmwareFields>;

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
  createdAt: string;
}

export interface FirmwareRow {
  id: string;
  account_id: string;
  model_id: string;
  model: string;
  version: string;
  version_key: string;
  release_notes: string;
  changelog: string;
  size: number | string;
  sha256: string;
  storage_key: string | null;
  created_at: Date;
}

export const toFirmwareVersion = (row: FirmwareRow): FirmwareVersion => ({
  id: row.id,
  modelId: row.model_id,
  model: row.model,
  version: row.version,
  releaseNotes: row.release_notes,
  changelog: row.changelog,
  size: Number(row.size),
  sha256: row.sha256,
  fileAvailable: row.storage_key !== null,
  createdAt: new Date(row.created_at).toISOString(),
});

const ACTIVE = ['queued', 'sent', 'downloading', 'installing', 'rebooting'];

/** Firmware versions of the account's models and their binaries (decisions.md "Firmware and OTA"). */
export class FirmwareService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: { models: ModelService; storage: FirmwareStorage; maxFirmwareBytes: number },
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
   * 422 unknown_model / invalid_version, 409 already_exists (`1.4` and `1.4.0` are the same version).
   * The temp file is removed whenever this throws.
   */
  async create(actor: Actor, input: { fields: UploadFirmwareFields; file: StoredTemp | null }): Promise<FirmwareVersion> {
    const { file } = input;
    try {
      requireAdmin(actor);
      const fields = UploadFirmwareFields.parse(input.fields);
      if (!file) {
        throw new DomainError('validation_failed', 'The firmware binary is missing.', { errors: [{ field: 'file', message: 'is required (multipart file field "file")' }] });
      }
      if (file.size === 0) {
        throw new DomainError('validation_failed', 'The firmware binary is empty.', { errors: [{ field: 'file', message: 'must not be empty' }] });
      }
      requireVersion(fields.version, 'version');
      const model = await this.area.models.requireByName(actor, fields.model);
      const key = versionKey(fields.version);
      const existing = await this.deps.knex('firmware_versions').where({ model_id: model.id, version_key: key }).first('version');
      if (existing) throw alreadyExists(fields.version, model.name, (existing as { version: string }).version);
      const id = newId();
      const storageKey = await this.area.storage.commit(file, id);
      const row = {
        id,
        account_id: actor.accountId,
        model_id: model.id,
        version: fields.version,
        version_key: key,
        release_notes: fields.release_notes,
        changelog: fields.changelog,
        size: file.size,
        sha256: file.sha256,
        storage_key: storageKey,
        created_at: this.deps.clock.now(),
      };
      try {
        await this.deps.knex('firmware_versions').insert(row);
      } catch (error) {
        await this.area.storage.remove(storageKey);
        if ((error as { code?: string }).code === '23505') throw alreadyExists(fields.version, model.name, fields.version);
        throw error;
      }
      return toFirmwareVersion({ ...row, model: model.name });
    } catch (error) {
      if (file) await this.area.storage.discard(file);
      throw error;
    }
  }

  /** Newest version first (by version, not by upload time); optionally one model. */
  async list(actor: Actor, input: { model?: string | undefined } = {}): Promise<FirmwareVersion[]> {
    const q = this.deps
      .knex('firmware_versions as f')
      .join('models as m', 'm.id', 'f.model_id')
      .where('f.account_id', actor.accountId)
      .select('f.*', 'm.name as model')
      .orderBy([{ column: 'f.version_key', order: 'desc' }, { column: 'm.name', order: 'asc' }]);
    if (input.model !== undefined) q.andWhere('m.name', input.model);
    return ((await q) as FirmwareRow[]).map(toFirmwareVersion);
  }

  async get(actor: Actor, input: { id: string }): Promise<FirmwareVersion> {
    if (!isUuid(input.id)) throw notFound('Firmware version');
    const row = (await this.deps
      .knex('firmware_versions as f')
      .join('models as m', 'm.id', 'f.model_id')
      .where({ 'f.account_id': actor.accountId, 'f.id': input.id })
      .first('f.*', 'm.name as model')) as FirmwareRow | undefined;
    if (!row) throw notFound('Firmware version');
    return toFirmwareVersion(row);
  }

  /**
   * Deletes the binary; the record stays (storage_key null) so history and rollbacks can name the
   * version and say its file is gone. Refused (409) while an unfinished update targets it.
   */
  async deleteFile(actor: Actor, input: { id: string }): Promise<FirmwareVersion> {
    requireAdmin(actor);
    if (!isUuid(input.id)) throw notFound('Firmware version');
    const { row, storageKey } = await this.deps.transaction(async (trx) => {
      const found = (await trx('firmware_versions as f')
        .join('models as m', 'm.id', 'f.model_id')
        .where({ 'f.account_id': actor.accountId, 'f.id': input.id })
        .forUpdate('f')
        .first('f.*', 'm.name as model')) as FirmwareRow | undefined;
      if (!found) throw notFound('Firmware version');
      const busy = await trx('device_updates').where({ firmware_version_id: input.id }).whereIn('state', ACTIVE).first('id');
      if (busy) {
        throw new DomainError('invalid_state', `Firmware ${found.version} is the target of unfinished updates; cancel their deployments first.`);
      }
      await trx('firmware_versions').where({ id: input.id }).update({ storage_key: null });
      return { row: { ...found, storage_key: null }, storageKey: found.storage_key };
    });
    if (storageKey) await this.area.storage.remove(storageKey);
    return toFirmwareVersion(row);
  }
}

function alreadyExists(version: string, model: string, existing: string): DomainError {
  return new DomainError('already_exists', `Model "${model}" has version ${existing} already${existing !== version ? ` (the same version as ${version})` : ''}.`, {
    errors: [{ field: 'version', message: 'exists already for this model' }],
  });
}
