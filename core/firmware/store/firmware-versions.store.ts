import type { Knex } from 'knex';
import { ACTIVE_STATES } from '../../deployments/deployment-types';
import type { Db } from '../../db/db';

/** A firmware version as stored, with its model's name. `storageKey` is null once the binary was deleted. */
export interface FirmwareVersionRecord {
  id: string;
  accountId: string;
  modelId: string;
  model: string;
  version: string;
  versionKey: string;
  releaseNotes: string;
  changelog: string;
  size: number;
  sha256: string;
  storageKey: string | null;
  signature: string | null;
  signingKeyId: string | null;
  /** The versions that may install this one directly (a range, version-range.ts); null: any. */
  upgradeFrom: string | null;
  createdAt: Date;
}

/** What a deployment needs of the version it installs. */
export interface FirmwareRef {
  id: string;
  modelId: string;
  model: string;
  version: string;
  storageKey: string | null;
}

interface FirmwareRow {
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
  signature: string | null;
  signing_key_id: string | null;
  upgrade_from: string | null;
  created_at: Date;
}

const toFirmwareVersionRecord = (row: FirmwareRow): FirmwareVersionRecord => ({
  id: row.id,
  accountId: row.account_id,
  modelId: row.model_id,
  model: row.model,
  version: row.version,
  versionKey: row.version_key,
  releaseNotes: row.release_notes,
  changelog: row.changelog,
  // bigint: the driver gives a string.
  size: Number(row.size),
  sha256: row.sha256,
  storageKey: row.storage_key,
  signature: row.signature,
  signingKeyId: row.signing_key_id,
  upgradeFrom: row.upgrade_from ?? null,
  createdAt: new Date(row.created_at),
});

interface FirmwareRefRow {
  id: string;
  model_id: string;
  model: string;
  version: string;
  storage_key: string | null;
}

const toFirmwareRef = (row: FirmwareRefRow): FirmwareRef => ({
  id: row.id,
  modelId: row.model_id,
  model: row.model,
  version: row.version,
  storageKey: row.storage_key,
});

/** The version text stored for this model under this key (`1.4` and `1.4.0` share one), or null. */
export async function versionWithKey(db: Db, input: { modelId: string; versionKey: string }): Promise<string | null> {
  const row: Pick<FirmwareRow, 'version'> | undefined = await db('firmware_versions')
    .where({ model_id: input.modelId, version_key: input.versionKey })
    .first('version');
  return row ? row.version : null;
}

/** Records a version; `duplicate` when the model has this version already (unique index). */
export async function insertFirmwareVersion(
  db: Db,
  record: Omit<FirmwareVersionRecord, 'model'>,
): Promise<'inserted' | 'duplicate'> {
  try {
    await db('firmware_versions').insert({
      id: record.id,
      account_id: record.accountId,
      model_id: record.modelId,
      version: record.version,
      version_key: record.versionKey,
      release_notes: record.releaseNotes,
      changelog: record.changelog,
      size: record.size,
      sha256: record.sha256,
      storage_key: record.storageKey,
      signature: record.signature,
      signing_key_id: record.signingKeyId,
      upgrade_from: record.upgradeFrom,
      created_at: record.createdAt,
    });
    return 'inserted';
  } catch (error) {
    if (typeof error === 'object' && error !== null && 'code' in error && error.code === '23505') return 'duplicate';
    throw error;
  }
}

/** Newest version first (by version, not by upload time); optionally one model. */
export async function listFirmwareVersions(
  db: Db,
  input: { accountId: string; model?: string | undefined },
): Promise<FirmwareVersionRecord[]> {
  const q = db('firmware_versions as f')
    .join('models as m', 'm.id', 'f.model_id')
    .where('f.account_id', input.accountId)
    .select<FirmwareRow[]>('f.*', 'm.name as model')
    .orderBy([
      { column: 'f.version_key', order: 'desc' },
      { column: 'm.name', order: 'asc' },
    ]);
  if (input.model !== undefined) q.andWhere('m.name', input.model);
  const rows = await q;
  return rows.map(toFirmwareVersionRecord);
}

export async function findFirmwareVersion(
  db: Db,
  input: { accountId: string; id: string },
): Promise<FirmwareVersionRecord | null> {
  const row: FirmwareRow | undefined = await db('firmware_versions as f')
    .join('models as m', 'm.id', 'f.model_id')
    .where({ 'f.account_id': input.accountId, 'f.id': input.id })
    .first('f.*', 'm.name as model');
  return row ? toFirmwareVersionRecord(row) : null;
}

/** The version's row locked until the transaction ends (a deletion against a deploy that targets it). */
export async function lockFirmwareVersion(
  trx: Knex.Transaction,
  input: { accountId: string; id: string },
): Promise<FirmwareVersionRecord | null> {
  const row: FirmwareRow | undefined = await trx('firmware_versions as f')
    .join('models as m', 'm.id', 'f.model_id')
    .where({ 'f.account_id': input.accountId, 'f.id': input.id })
    .forUpdate('f')
    .first('f.*', 'm.name as model');
  return row ? toFirmwareVersionRecord(row) : null;
}

/** Whether an unfinished update (queued or in flight) installs this version. */
export async function isTargetOfUnfinishedUpdates(db: Db, firmwareVersionId: string): Promise<boolean> {
  // The last hop of an upgrade path under way needs the binary too (upgrade paths).
  const busy: { id: string } | undefined = await db('device_updates')
    .whereRaw('(firmware_version_id = ? OR final_firmware_version_id = ?)', [firmwareVersionId, firmwareVersionId])
    .whereIn('state', ACTIVE_STATES)
    .first('id');
  return busy !== undefined;
}

/** The binary was deleted: the record stays, without a storage key. */
export async function clearStorageKey(db: Db, firmwareVersionId: string): Promise<void> {
  await db('firmware_versions').where({ id: firmwareVersionId }).update({ storage_key: null });
}

/** A signature attached after the upload (the pair the CHECK constraint keeps together). */
export async function saveSignature(
  db: Db,
  input: { id: string; signature: string; signingKeyId: string },
): Promise<void> {
  await db('firmware_versions')
    .where({ id: input.id })
    .update({ signature: input.signature, signing_key_id: input.signingKeyId });
}

// ---- what deployments read of firmware versions

/** Those of the account's versions `ids` that carry no signature, in version order. */
export async function unsignedVersionsAmong(
  db: Db,
  input: { accountId: string; ids: string[] },
): Promise<Array<{ id: string; version: string }>> {
  return db('firmware_versions')
    .where({ account_id: input.accountId })
    .whereIn('id', input.ids)
    .whereNull('signature')
    .orderBy('version_key')
    .select<Array<{ id: string; version: string }>>('id', 'version');
}

/** The account's versions with this key, of one model when given (a deploy names a version, perhaps not its model). */
export async function firmwareRefsWithKey(
  db: Db,
  input: { accountId: string; versionKey: string; modelId?: string },
): Promise<FirmwareRef[]> {
  const q = db('firmware_versions as f')
    .join('models as m', 'm.id', 'f.model_id')
    .where({ 'f.account_id': input.accountId, 'f.version_key': input.versionKey })
    .select<FirmwareRefRow[]>('f.id', 'f.model_id', 'm.name as model', 'f.version', 'f.storage_key');
  if (input.modelId !== undefined) {
    const row = await q.andWhere('f.model_id', input.modelId).first();
    return row ? [toFirmwareRef(row)] : [];
  }
  const rows = await q;
  return rows.map(toFirmwareRef);
}

/** The id of the account's version of this model with this key, or null. */
export async function firmwareIdWithKey(
  db: Db,
  input: { accountId: string; modelId: string; versionKey: string },
): Promise<string | null> {
  const row: { id: string } | undefined = await db('firmware_versions')
    .where({ account_id: input.accountId, model_id: input.modelId, version_key: input.versionKey })
    .first('id');
  return row ? row.id : null;
}

/** The version text of the account's firmware version `id`, or null. */
export async function firmwareVersionText(db: Db, input: { accountId: string; id: string }): Promise<string | null> {
  const row: { version: string } | undefined = await db('firmware_versions')
    .where({ id: input.id, account_id: input.accountId })
    .first('version');
  return row ? row.version : null;
}

/** The binary's storage key of firmware version `id` (any account: the caller read the id from its own rows). */
export async function storageKeyOf(db: Db, firmwareVersionId: string): Promise<string | null> {
  const row: { storage_key: string | null } | undefined = await db('firmware_versions')
    .where({ id: firmwareVersionId })
    .first('storage_key');
  return row?.storage_key ?? null;
}

/** The account's versions of the model with these keys (a rollback returns devices to their own previous versions). */
export async function firmwareVersionsWithKeys(
  db: Db,
  input: { accountId: string; modelId: string; versionKeys: string[] },
): Promise<Array<{ id: string; version: string; versionKey: string; storageKey: string | null }>> {
  const rows: Array<{ id: string; version: string; version_key: string; storage_key: string | null }> = await db(
    'firmware_versions',
  )
    .where({ account_id: input.accountId, model_id: input.modelId })
    .whereIn('version_key', input.versionKeys)
    .select('id', 'version', 'version_key', 'storage_key');
  return rows.map((r) => ({ id: r.id, version: r.version, versionKey: r.version_key, storageKey: r.storage_key }));
}

/** Sets a version's `upgrade_from` (null: any version). */
export async function saveUpgradeFrom(db: Db, input: { id: string; upgradeFrom: string | null }): Promise<void> {
  await db('firmware_versions').where({ id: input.id }).update({ upgrade_from: input.upgradeFrom });
}

/** A version a device may be sent (it has a binary), with its `upgrade_from`: what upgrade paths are planned over. */
export interface PathFirmware {
  id: string;
  version: string;
  upgradeFrom: string | null;
}

/** The model's versions with a binary in the account, for planning upgrade paths. */
export async function pathFirmwareOf(db: Db, input: { accountId: string; modelId: string }): Promise<PathFirmware[]> {
  const rows: Array<{ id: string; version: string; upgrade_from: string | null }> = await db('firmware_versions')
    .where({ account_id: input.accountId, model_id: input.modelId })
    .whereNotNull('storage_key')
    .select('id', 'version', 'upgrade_from');
  return rows.map((r) => ({ id: r.id, version: r.version, upgradeFrom: r.upgrade_from }));
}

/** One version (any account: the caller checks), with its `upgrade_from`, whether or not it has a binary. */
export async function pathFirmwareById(
  db: Db,
  id: string,
): Promise<(PathFirmware & { accountId: string; modelId: string }) | null> {
  const row:
    { id: string; version: string; upgrade_from: string | null; account_id: string; model_id: string } | undefined =
    await db('firmware_versions').where({ id }).first('id', 'version', 'upgrade_from', 'account_id', 'model_id');
  return row
    ? {
        id: row.id,
        version: row.version,
        upgradeFrom: row.upgrade_from,
        accountId: row.account_id,
        modelId: row.model_id,
      }
    : null;
}
