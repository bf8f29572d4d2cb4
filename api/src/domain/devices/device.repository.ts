import type { Knex } from 'knex';
import { versionKey } from '../shared/version';
import type { DeviceConfig } from './device-config';
import { ACTIVE_UPDATE_STATES, type Device, type DeviceStatus, type Connectivity } from './device-types';
import { DEFAULT_DEVICE_SORT, type DeviceFilter, type DeviceSort, type DeviceSortField } from './device-list';

/**
 * SQL of the device list and detail: one statement per page that joins the model name and the
 * current update, so a page of 100 costs one round trip (plus the count). Raw SQL on purpose:
 * it is the hot path of the REST list and the 100,000-device stream (bench/devices-list.bench.ts).
 * Every statement is scoped by `account_id` (tenant isolation).
 */

type Db = Knex | Knex.Transaction;

const ACTIVE_STATES_SQL = ACTIVE_UPDATE_STATES.map((s) => `'${s}'`).join(',');

/**
 * Timestamps leave PostgreSQL already in the wire format (the same text as Date#toISOString),
 * which spares parsing and re-formatting three dates per row on lists of 100,000.
 */
const isoUtc = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

// `a` is the device's unfinished update (unique partial index device_updates_one_active);
// `c` the one devices.current_update_id points at (the OTA engine may keep the last finished one).
const SELECT_DEVICE = `
SELECT d.id, d.serial, d.name, m.name AS model, d.firmware, d.status, d.connectivity, ${isoUtc('d.last_seen')} AS last_seen, d.ip,
       d.uptime_s, d.rssi, d.tags, d.desired_config, d.desired_config_version, d.reported_config,
       d.reported_config_version, ${isoUtc('d.claimed_at')} AS claimed_at,
       COALESCE(a.id, c.id) AS u_id, COALESCE(a.deployment_id, c.deployment_id) AS u_deployment_id,
       COALESCE(a.state, c.state) AS u_state, COALESCE(a.progress, c.progress) AS u_progress,
       CASE WHEN a.id IS NOT NULL THEN a.from_version ELSE c.from_version END AS u_from_version,
       COALESCE(a.target_version, c.target_version) AS u_target_version,
       CASE WHEN a.id IS NOT NULL THEN a.error ELSE c.error END AS u_error,
       ${isoUtc('COALESCE(a.state_changed_at, c.state_changed_at)')} AS u_state_changed_at
  FROM devices d
  JOIN models m ON m.id = d.model_id
  LEFT JOIN device_updates a ON a.device_id = d.id AND a.state IN (${ACTIVE_STATES_SQL})
  LEFT JOIN device_updates c ON c.id = d.current_update_id`;

export interface DeviceRow {
  id: string;
  serial: string;
  name: string;
  model: string;
  firmware: string | null;
  status: DeviceStatus;
  connectivity: Connectivity;
  last_seen: string | null;
  ip: string | null;
  uptime_s: number | null;
  rssi: number | null;
  tags: Record<string, string>;
  desired_config: DeviceConfig;
  desired_config_version: number;
  reported_config: DeviceConfig | null;
  reported_config_version: number | null;
  claimed_at: string;
  u_id: string | null;
  u_deployment_id: string | null;
  u_state: string | null;
  u_progress: number | null;
  u_from_version: string | null;
  u_target_version: string | null;
  u_error: string | null;
  u_state_changed_at: string | null;
}

export function toDevice(row: DeviceRow): Device {
  return {
    id: row.id,
    serial: row.serial,
    name: row.name,
    model: row.model,
    firmware: row.firmware,
    status: row.status,
    connectivity: row.connectivity,
    lastSeen: row.last_seen,
    ip: row.ip,
    uptimeS: row.uptime_s,
    rssi: row.rssi,
    tags: row.tags ?? {},
    config: {
      desired: row.desired_config ?? {},
      desiredVersion: row.desired_config_version,
      reported: row.reported_config,
      reportedVersion: row.reported_config_version,
      inSync: row.reported_config_version !== null && row.reported_config_version === row.desired_config_version,
    },
    update:
      row.u_id === null
        ? null
        : {
            jobId: row.u_id,
            deploymentId: row.u_deployment_id!,
            state: row.u_state!,
            progress: row.u_progress ?? 0,
            fromVersion: row.u_from_version,
            targetVersion: row.u_target_version!,
            error: row.u_error,
            stateChangedAt: row.u_state_changed_at!,
          },
    claimedAt: row.claimed_at,
  };
}

/** `%`, `_` and `\` are LIKE wildcards; escape them so `q` is a plain substring. */
const likeSubstring = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** WHERE clause (without the keyset) for an account and filter; `?` placeholders for knex.raw. */
function whereClause(accountId: string, filter: DeviceFilter): { sql: string; bindings: Knex.Value[] } {
  const parts = ['d.account_id = ?'];
  const bindings: Knex.Value[] = [accountId];
  if (filter.model !== undefined) {
    parts.push('d.model_id = (SELECT id FROM models WHERE account_id = ? AND name = ?)');
    bindings.push(accountId, filter.model);
  }
  if (filter.status !== undefined) {
    parts.push('d.status = ?');
    bindings.push(filter.status);
  }
  if (filter.firmware !== undefined) {
    parts.push('d.firmware = ?');
    bindings.push(filter.firmware);
  }
  if (filter.firmwareLt !== undefined) {
    parts.push('d.firmware_key < ?');
    bindings.push(versionKey(filter.firmwareLt));
  }
  if (filter.q !== undefined && filter.q !== '') {
    parts.push('(d.serial ILIKE ? OR d.name ILIKE ?)');
    const pattern = likeSubstring(filter.q);
    bindings.push(pattern, pattern);
  }
  return { sql: parts.join(' AND '), bindings };
}

/**
 * The sort key of each order as text in the "C" collation, so a keyset cursor is one string and
 * `(key, serial) > (?, ?)` pages without gaps or repeats: firmware by its version key (1.10.0
 * after 1.9.0), names case-insensitively, never-seen devices first (ascending), missing values as ''.
 * Only the serial order has an index; the others sort the filter's matches per page (fine at
 * 100,000 devices: an index on last_seen would be rewritten by every heartbeat flush).
 */
const SORT_KEY_SQL: Record<DeviceSortField, string> = {
  serial: 'd.serial',
  name: 'lower(d.name) COLLATE "C"',
  model: 'm.name COLLATE "C"',
  // Ordered by what the list shows: a device that never reported sorts as having no firmware.
  firmware: `(CASE WHEN d.firmware IS NULL THEN '' ELSE d.firmware_key END) COLLATE "C"`,
  status: 'd.status COLLATE "C"',
  last_seen: `COALESCE(to_char(d.last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '') COLLATE "C"`,
  ip: `COALESCE(d.ip, '') COLLATE "C"`,
};

export interface DevicePageQuery {
  accountId: string;
  filter: DeviceFilter;
  /** Serial of the last row of the previous page (null: first page). */
  afterSerial: string | null;
  /** Sort key of that row (needed for every order but serial). */
  afterKey?: string | null;
  limit: number;
  sort?: DeviceSort;
}

/** A row of a page with the keys its cursor is made of. */
export interface Keyed<T> {
  item: T;
  serial: string;
  sortKey: string;
}

/** One keyset page in the requested order (serial ascending by default), at most `limit` rows. */
export async function selectDevicePage(db: Db, input: DevicePageQuery): Promise<Array<Keyed<Device>>> {
  const query = devicePageQuery(input);
  const result = (await db.raw(query.sql, query.bindings)) as { rows: Array<DeviceRow & { sort_key: string }> };
  return result.rows.map((r) => ({ item: toDevice(r), serial: r.serial, sortKey: r.sort_key }));
}

/**
 * The same page, each device already rendered by PostgreSQL as the JSON document of the wire
 * format (snake_case; exactly what rest-facade's presentDevice produces, checked by
 * test/integration/devices-list.test.ts). Lists of 100,000 then cost Node no JSON parsing, no
 * objects and no re-serialization: it joins strings (bench/devices-list.bench.ts).
 */
export async function selectDeviceJsonPage(db: Db, input: DevicePageQuery): Promise<Array<Keyed<string>>> {
  const page = devicePageQuery(input);
  const result = (await db.raw(
    // row_to_json writes compact JSON (json_build_object pads every key with spaces).
    `SELECT s.serial, s.sort_key, row_to_json(r)::text AS json
     FROM (${page.sql}) s
     CROSS JOIN LATERAL (SELECT s.serial, s.name, s.model, s.firmware, s.status, s.last_seen, s.ip, s.connectivity,
       CASE WHEN s.u_id IS NULL THEN NULL ELSE (SELECT row_to_json(u) FROM (SELECT s.u_id AS job_id, s.u_deployment_id AS deployment_id,
         s.u_state AS state, COALESCE(s.u_progress, 0) AS progress, s.u_from_version AS from_version, s.u_target_version AS target_version,
         s.u_error AS error, s.u_state_changed_at AS state_changed_at) u) END AS "update",
       COALESCE(s.tags, '{}'::jsonb) AS tags,
       (SELECT row_to_json(c) FROM (SELECT COALESCE(s.desired_config, '{}'::jsonb) AS desired, s.desired_config_version AS desired_version,
         s.reported_config AS reported, s.reported_config_version AS reported_version,
         COALESCE(s.reported_config_version = s.desired_config_version, false) AS in_sync) c) AS config,
       s.uptime_s, s.rssi, s.claimed_at) r
     ORDER BY ${page.outerOrder}`,
    page.bindings,
  )) as { rows: Array<{ serial: string; sort_key: string; json: string }> };
  return result.rows.map((r) => ({ item: r.json, serial: r.serial, sortKey: r.sort_key }));
}

/** The statement behind a page (exported so benchmarks can EXPLAIN exactly what runs). */
/** `outerOrder` re-applies the order to a statement that wraps this one (the JSON page). */
export function devicePageQuery(input: DevicePageQuery): { sql: string; bindings: Knex.Value[]; outerOrder: string } {
  const where = whereClause(input.accountId, input.filter);
  const sort = input.sort ?? DEFAULT_DEVICE_SORT;
  const key = SORT_KEY_SQL[sort.field];
  const dir = sort.direction === 'desc' ? 'DESC' : 'ASC';
  const select = `SELECT ${key} AS sort_key,${SELECT_DEVICE.replace(/^\s*SELECT/, '')}`;
  if (sort.field === 'serial') {
    const keyset = input.afterSerial === null ? '' : ` AND d.serial ${dir === 'ASC' ? '>' : '<'} ?`;
    return {
      sql: `${select} WHERE ${where.sql}${keyset} ORDER BY d.serial ${dir} LIMIT ?`,
      bindings: [...where.bindings, ...(input.afterSerial === null ? [] : [input.afterSerial]), input.limit],
      outerOrder: `s.serial ${dir}`,
    };
  }
  const after = input.afterSerial === null ? null : { key: input.afterKey ?? '', serial: input.afterSerial };
  const keyset = after === null ? '' : ` AND (${key}, d.serial) ${dir === 'ASC' ? '>' : '<'} (?, ?)`;
  return {
    sql: `${select} WHERE ${where.sql}${keyset} ORDER BY ${key} ${dir}, d.serial ${dir} LIMIT ?`,
    bindings: [...where.bindings, ...(after === null ? [] : [after.key, after.serial]), input.limit],
    outerOrder: `s.sort_key ${dir}, s.serial ${dir}`,
  };
}

/** Matches of the filter in the account, and the account's quota, in one round trip. */
export async function countDevicesAndQuota(db: Db, input: { accountId: string; filter: DeviceFilter }): Promise<{ total: number; quota: number }> {
  const where = whereClause(input.accountId, input.filter);
  const result = (await db.raw(
    `SELECT (SELECT count(*) FROM devices d WHERE ${where.sql}) AS total, a.quota FROM accounts a WHERE a.id = ?`,
    [...where.bindings, input.accountId],
  )) as { rows: Array<{ total: string | number; quota: number }> };
  const row = result.rows[0];
  return { total: Number(row?.total ?? 0), quota: row?.quota ?? 0 };
}

export async function selectQuota(db: Db, accountId: string): Promise<number> {
  const row = (await db('accounts').where({ id: accountId }).first('quota')) as { quota: number } | undefined;
  return row?.quota ?? 0;
}

export async function selectDeviceBySerial(db: Db, input: { accountId: string; serial: string }): Promise<Device | null> {
  const result = (await db.raw(`${SELECT_DEVICE} WHERE d.account_id = ? AND d.serial = ?`, [input.accountId, input.serial])) as {
    rows: DeviceRow[];
  };
  const row = result.rows[0];
  return row ? toDevice(row) : null;
}

export async function selectDevicesByIds(db: Db, input: { accountId: string; ids: string[] }): Promise<Device[]> {
  if (input.ids.length === 0) return [];
  const result = (await db.raw(`${SELECT_DEVICE} WHERE d.account_id = ? AND d.id = ANY(?::uuid[]) ORDER BY d.serial`, [input.accountId, input.ids])) as {
    rows: DeviceRow[];
  };
  return result.rows.map(toDevice);
}

/** The raw row, locked for the rest of the transaction (PATCH, rotation, unclaim). */
export interface LockedDeviceRow {
  id: string;
  serial: string;
  name: string;
  tags: Record<string, string>;
  desired_config: DeviceConfig;
  desired_config_version: number;
}

export async function lockDevice(trx: Knex.Transaction, input: { accountId: string; serial: string }): Promise<LockedDeviceRow | null> {
  const row = (await trx('devices')
    .where({ account_id: input.accountId, serial: input.serial })
    .forUpdate()
    .first('id', 'serial', 'name', 'tags', 'desired_config', 'desired_config_version')) as LockedDeviceRow | undefined;
  return row ?? null;
}
