import type { Knex } from 'knex';
import type { DeviceConfig } from '../device-config';
import type { Device } from '../device-types';
import type { DeviceUpdateBase } from '../device-update';
import { SELECT_DEVICE, toDevice, type DeviceRow } from './device-row';
import type { Db } from '../../db/db';
import { selectConfigVersionMarks } from './config-version-marks.store';

/** Reads and writes of the `devices` row itself. Every read is scoped by `account_id`. */

export async function selectDeviceBySerial(
  db: Db,
  input: { accountId: string; serial: string },
): Promise<Device | null> {
  const result = await db.raw<{ rows: DeviceRow[] }>(`${SELECT_DEVICE} WHERE d.account_id = ? AND d.serial = ?`, [
    input.accountId,
    input.serial,
  ]);
  const row = result.rows[0];
  return row ? toDevice(row) : null;
}

/** The account's devices among `ids`, in serial order (others' and unknown ids are absent). */
export async function selectDevicesByIds(db: Db, input: { accountId: string; ids: string[] }): Promise<Device[]> {
  if (input.ids.length === 0) return [];
  const result = await db.raw<{ rows: DeviceRow[] }>(
    `${SELECT_DEVICE} WHERE d.account_id = ? AND d.id = ANY(?::uuid[]) ORDER BY d.serial`,
    [input.accountId, input.ids],
  );
  return result.rows.map(toDevice);
}

/**
 * The id of the account's device with that serial, or null. `lock: 'share'` holds a share lock
 * on the row until the transaction ends: unclaim's row lock then waits, so nothing is recorded
 * for a device being deleted.
 */
export async function findDeviceId(
  db: Db,
  input: { accountId: string; serial: string; lock?: 'share' },
): Promise<string | null> {
  const query = db('devices').where({ account_id: input.accountId, serial: input.serial });
  if (input.lock === 'share') query.forShare();
  const row: { id: string } | undefined = await query.first('id');
  return row?.id ?? null;
}

interface LockedDeviceRow {
  id: string;
  serial: string;
  name: string;
  tags: Record<string, string> | null;
  desired_config: DeviceConfig | null;
  desired_config_version: number;
  site_id: string | null;
}

/** The device row, locked for the rest of the transaction (PATCH, rotation, unclaim). */
export async function lockDevice(
  trx: Knex.Transaction,
  input: { accountId: string; serial: string },
): Promise<DeviceUpdateBase | null> {
  const row: LockedDeviceRow | undefined = await trx('devices')
    .where({ account_id: input.accountId, serial: input.serial })
    .forUpdate()
    .first('id', 'serial', 'name', 'tags', 'desired_config', 'desired_config_version', 'site_id');
  if (!row) return null;
  return {
    id: row.id,
    serial: row.serial,
    name: row.name,
    tags: row.tags ?? {},
    desiredConfig: row.desired_config ?? {},
    desiredConfigVersion: row.desired_config_version,
    siteId: row.site_id,
  };
}

/** What a PATCH writes; absent parts stay as they are. */
export interface DeviceColumnsUpdate {
  name?: string;
  tags?: Record<string, string>;
  /** A new desired configuration and its version; its heartbeat interval drives presence. */
  config?: { version: number; config: DeviceConfig };
  /** The device's site (null: none). */
  site?: { id: string } | null;
}

export async function updateDevice(
  trx: Knex.Transaction,
  input: { deviceId: string; update: DeviceColumnsUpdate; now: Date },
): Promise<void> {
  const { update } = input;
  const columns: Record<string, unknown> = {};
  if (update.name !== undefined) columns.name = update.name;
  if (update.tags !== undefined) columns.tags = JSON.stringify(update.tags);
  if (update.site !== undefined) columns.site_id = update.site?.id ?? null;
  if (update.config !== undefined) {
    columns.desired_config = JSON.stringify(update.config.config);
    columns.desired_config_version = update.config.version;
    if (update.config.config.heartbeat_interval_s !== undefined)
      columns.heartbeat_interval_s = update.config.config.heartbeat_interval_s;
  }
  columns.updated_at = input.now;
  await trx('devices').where({ id: input.deviceId }).update(columns);
}

/** Serials among these that are claimed already, by any account. */
export async function selectTakenSerials(db: Db, input: { serials: string[] }): Promise<string[]> {
  return db<{ serial: string }>('devices').whereRaw('serial = ANY(?)', [input.serials]).pluck('serial');
}

/**
 * Claimed devices start offline and untagged, at configuration version 1, or one above the
 * highest version their serial was ever given (a serial claimed again: its versions only go up).
 */
export async function insertClaimedDevices(
  trx: Knex.Transaction,
  input: {
    accountId: string;
    modelId: string;
    /** Sortable key of the version the claim installs (null without one); `firmware` stays null until the device reports. */
    firmwareKey: string | null;
    config: DeviceConfig & { heartbeat_interval_s: number };
    now: Date;
    devices: Array<{ id: string; serial: string; name: string }>;
    /** The site every claimed device is assigned to (null: none). */
    siteId?: string | null;
  },
): Promise<void> {
  const marks = await selectConfigVersionMarks(trx, { serials: input.devices.map((d) => d.serial) });
  await trx('devices').insert(
    input.devices.map((d) => ({
      id: d.id,
      account_id: input.accountId,
      serial: d.serial,
      name: d.name,
      model_id: input.modelId,
      status: 'offline',
      connectivity: 'offline',
      tags: '{}',
      desired_config: JSON.stringify(input.config),
      desired_config_version: (marks.get(d.serial) ?? 0) + 1,
      heartbeat_interval_s: input.config.heartbeat_interval_s,
      // Until the device reports, version comparisons (firmware_lt in lists, dry runs and
      // deploys) take it as running what its claim installs; `firmware` stays null.
      firmware_key: input.firmwareKey,
      claimed_at: input.now,
      updated_at: input.now,
      site_id: input.siteId ?? null,
    })),
  );
}

/**
 * Share lock on the account row. Unclaim takes it first: a deployment being scheduled holds the
 * account lock while it writes update rows for the devices it read, so unclaim waits for it and
 * no update row outlives its device.
 */
export async function shareLockAccount(trx: Knex.Transaction, input: { accountId: string }): Promise<void> {
  await trx('accounts').where({ id: input.accountId }).forShare().first('id');
}

/**
 * Unclaim: the device's updates go with it (update rows carry no foreign key). Returns the
 * deployments they belonged to that have not finished (a finished one keeps its figures).
 */
export async function deleteUpdatesOfDevice(trx: Knex.Transaction, input: { deviceId: string }): Promise<string[]> {
  const { rows } = await trx.raw<{ rows: Array<{ id: string }> }>(
    `WITH gone AS (DELETE FROM device_updates WHERE device_id = ? RETURNING deployment_id)
     SELECT p.id FROM deployments p WHERE p.id IN (SELECT deployment_id FROM gone) AND p.finished_at IS NULL`,
    [input.deviceId],
  );
  return rows.map((r) => r.id);
}

export async function deleteDevice(trx: Knex.Transaction, input: { deviceId: string }): Promise<void> {
  await trx('devices').where({ id: input.deviceId }).delete();
}
