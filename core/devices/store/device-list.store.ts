import type { Knex } from 'knex';
import { versionKey } from '../../shared/version';
import { DEFAULT_DEVICE_SORT, type DeviceFilter, type DeviceSort, type DeviceSortField } from '../device-list';
import type { Device } from '../device-types';
import { SELECT_DEVICE, toDevice, type DeviceRow } from './device-row';
import { preparedRaw } from '../../db/prepared';
import type { Db } from '../../db/db';
import { isUuid } from '../../shared/ids';

/**
 * SQL of the device list: one statement per page that joins the model name and the current
 * update, so a page of 100 costs one round trip (plus the count). Raw SQL on purpose: it is the
 * hot path of the REST list and the 100,000-device stream (bench/devices-list.bench.ts).
 * Every statement is scoped by `account_id` (tenant isolation).
 */

/** `%`, `_` and `\` are LIKE wildcards; escape them so `q` is a plain substring. */
export const likeSubstring = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * How a search term (`q`) is matched:
 *  - `terms`: looked up in `device_search_terms` (migrations/20261128010000_device_search_terms.ts),
 *    whose trigram indexes find a term they can narrow (`indexable`) without reading the devices. The
 *    ids come as an array (`= ANY (ARRAY(...))`), planned on their own: as `IN (subquery)` the
 *    planner took a parallel scan of every account's terms for it (33 ms instead of 0.3 ms for a
 *    term of 120 matches among 100,000), and the array reads the devices by primary key without
 *    a join (page of those 120: 2.7 ms of PostgreSQL against 3.6 for the join, one client).
 *    For counts and for pages of few matches.
 *  - `rows`: tested on each device row the page walks in its order; cheapest when matches are
 *    common (a page stops after `limit` of them) and for terms no trigram narrows.
 */
type SearchBy = 'terms' | 'rows';

/** A run of letters and digits: what pg_trgm takes trigrams from (other characters separate words). */
const WORD = /[\p{L}\p{N}]+/gu;

/**
 * Whether a trigram index can narrow `ILIKE '%term%'`: pg_trgm takes a trigram from a word of
 * the term only when the word, padded where the term shows its edge (two spaces before a word
 * that a separator precedes, one after a word that a separator follows; none at the term's own
 * ends, where anything may continue it), is 3 characters or more. So `S-1` is narrowed by ` 1`
 * and `abc` by itself; `ab`, `1-` and `---` give none, and the index would read every account's
 * terms for them (88 ms at 120,000 devices, measured here): they walk the account's own rows.
 */
export function indexable(q: string | undefined): boolean {
  if (q === undefined) return false;
  for (const word of q.matchAll(WORD)) {
    const before = word.index > 0 ? 2 : 0;
    const after = word.index + word[0].length < q.length ? 1 : 0;
    // In characters, as pg_trgm counts (a letter beyond the BMP is two UTF-16 units).
    if (before + Array.from(word[0]).length + after >= 3) return true;
  }
  return false;
}

/** The ids of the account's devices whose serial or name holds `q` (case-insensitive). */
function searchTerms(accountId: string, q: string): { sql: string; bindings: Knex.Value[] } {
  const pattern = likeSubstring(q);
  return {
    sql: 'SELECT t.device_id FROM device_search_terms t WHERE t.account_id = ? AND (t.serial ILIKE ? OR t.name ILIKE ?)',
    bindings: [accountId, pattern, pattern],
  };
}

/** WHERE clause (without the keyset) for an account and filter; `?` placeholders for knex.raw. */
function whereClause(
  accountId: string,
  filter: DeviceFilter,
  search: SearchBy,
): { sql: string; bindings: Knex.Value[] } {
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
  if (filter.site !== undefined) {
    if (isUuid(filter.site)) {
      parts.push('d.site_id = ?');
      bindings.push(filter.site);
    } else {
      parts.push('d.site_id = (SELECT id FROM sites WHERE account_id = ? AND lower(name) = lower(?))');
      bindings.push(accountId, filter.site);
    }
  }
  if (filter.q !== undefined && filter.q !== '') {
    if (search === 'terms') {
      const terms = searchTerms(accountId, filter.q);
      parts.push(`d.id = ANY (ARRAY(${terms.sql}))`);
      bindings.push(...terms.bindings);
    } else {
      const pattern = likeSubstring(filter.q);
      parts.push('(d.serial ILIKE ? OR d.name ILIKE ?)');
      bindings.push(pattern, pattern);
    }
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
  /**
   * The filter is known to match few devices (a rare search term, counted first): the page reads
   * its matches from the search terms' trigram indexes and sorts them instead of walking the
   * serial index. Walking it, a term of 120 matches among 100,000 devices read all 100,000 (30-250
   * ms); the planner took that path whenever the columns' statistics suggested a few hundred
   * matches, while the trigram indexes find them in under a millisecond. Ignored for a term no
   * trigram narrows (`indexable`).
   */
  fewMatches?: boolean;
}

/**
 * Where a page's statement runs: `knex` for a search that walks the rows, planned with its term
 * each time; `plannedOnce` for every other page, whose statement keeps one plan (core/db/database.ts).
 * Each plan suits every account since a page can only walk an index that starts with the
 * account (migrations/20261128200000_serial_unique_without_order.ts).
 */
export interface PageDb {
  knex: Db;
  plannedOnce: Db;
}

/** A row of a page with the keys its cursor is made of. */
export interface Keyed<T> {
  item: T;
  serial: string;
  sortKey: string;
}

/** One keyset page in the requested order (serial ascending by default), at most `limit` rows. */
export async function selectDevicePage(db: PageDb, input: DevicePageQuery): Promise<Array<Keyed<Device>>> {
  const query = devicePageQuery(input);
  const result = await pageRaw<{ rows: Array<DeviceRow & { sort_key: string }> }>(db, input, query.sql, query.bindings);
  return result.rows.map((r) => ({ item: toDevice(r), serial: r.serial, sortKey: r.sort_key }));
}

/**
 * The same page, each device already rendered by PostgreSQL as the JSON document of the wire
 * format (snake_case; exactly what rest-facade's presentDevice produces, checked by
 * test/integration/devices-list.test.ts). Lists of 100,000 then cost Node no JSON parsing, no
 * objects and no re-serialization: it joins strings (bench/devices-list.bench.ts).
 */
export async function selectDeviceJsonPage(db: PageDb, input: DevicePageQuery): Promise<Array<Keyed<string>>> {
  const page = devicePageQuery(input);
  const result = await pageRaw<{ rows: Array<{ serial: string; sort_key: string; json: string }> }>(
    db,
    input,
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
       s.uptime_s, s.rssi, s.claimed_at, s.firmware_reported_invalid, s.refused_messages, s.last_refused_message,
       s.refused_fields,
       CASE WHEN s.site_id IS NULL THEN NULL ELSE (SELECT row_to_json(st) FROM (SELECT s.site_id AS id, s.site_name AS name) st) END AS site) r
     ORDER BY ${page.outerOrder}`,
    page.bindings,
  );
  return result.rows.map((r) => ({ item: r.json, serial: r.serial, sortKey: r.sort_key }));
}

/**
 * A page statement, prepared with one plan unless it searches (`q`) by walking the rows. The
 * best plan of a search depends on its term (a rare one reads its few matches from the search
 * terms' indexes, 0.3 ms instead of a 30 ms walk of 100,000 rows; a short or common one walks
 * the serial order), so a search that walks is planned with its term each time. A search counted
 * to few matches (`fewMatches`) has a statement of its own, whose one plan reads the terms'
 * indexes for every term they narrow: 1.5 ms of PostgreSQL a page instead of 3.4 ms planned each
 * time (120 matches among 100,000 devices, one connection).
 */
function pageRaw<TResult>(db: PageDb, input: DevicePageQuery, sql: string, bindings: Knex.Value[]): Knex.Raw<TResult> {
  const walkingSearch = input.filter.q !== undefined && input.filter.q !== '' && !readsTerms(input);
  return walkingSearch
    ? db.knex.raw<TResult>(sql, bindings)
    : preparedRaw<TResult>(db.plannedOnce, sql, bindings, input.accountId);
}

/** Whether the page reads its matches from the search terms (DevicePageQuery.fewMatches). */
const readsTerms = (input: DevicePageQuery): boolean => input.fewMatches === true && indexable(input.filter.q);

/**
 * The page size, written into the statement rather than bound: a bound LIMIT leaves a prepared
 * statement's generic plan guessing how many rows are wanted, and PostgreSQL then spent twice
 * the CPU per page (0.52 ms instead of 0.29 ms for 100 rows of 100,000, measured here).
 */
function pageLimit(limit: number): number {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`page limit must be a positive integer, not ${limit}`);
  return limit;
}

/**
 * The statement behind a page (exported so benchmarks can EXPLAIN exactly what runs).
 * `outerOrder` re-applies the order to a statement that wraps this one (the JSON page).
 */
export function devicePageQuery(input: DevicePageQuery): { sql: string; bindings: Knex.Value[]; outerOrder: string } {
  const few = readsTerms(input);
  const where = whereClause(input.accountId, input.filter, few ? 'terms' : 'rows');
  const sort = input.sort ?? DEFAULT_DEVICE_SORT;
  const key = SORT_KEY_SQL[sort.field];
  const dir = sort.direction === 'desc' ? 'DESC' : 'ASC';
  const select = `SELECT ${key} AS sort_key,${SELECT_DEVICE.replace(/^\s*SELECT/, '')}`;
  const limit = pageLimit(input.limit);
  if (sort.field === 'serial') {
    const keyset = input.afterSerial === null ? '' : ` AND d.serial ${dir === 'ASC' ? '>' : '<'} ?`;
    return {
      // `d.serial || ''` sorts the same (same collation) but no index provides it.
      sql: `${select} WHERE ${where.sql}${keyset} ORDER BY ${few ? `(d.serial || '')` : 'd.serial'} ${dir} LIMIT ${limit}`,
      bindings: [...where.bindings, ...(input.afterSerial === null ? [] : [input.afterSerial])],
      outerOrder: `s.serial ${dir}`,
    };
  }
  const after = input.afterSerial === null ? null : { key: input.afterKey ?? '', serial: input.afterSerial };
  const keyset = after === null ? '' : ` AND (${key}, d.serial) ${dir === 'ASC' ? '>' : '<'} (?, ?)`;
  return {
    sql: `${select} WHERE ${where.sql}${keyset} ORDER BY ${key} ${dir}, d.serial ${dir} LIMIT ${limit}`,
    bindings: [...where.bindings, ...(after === null ? [] : [after.key, after.serial])],
    outerOrder: `s.sort_key ${dir}, s.serial ${dir}`,
  };
}

/** Matches of the filter in the account, and the account's quota, in one round trip. */
export async function countDevicesAndQuota(
  db: Db,
  input: { accountId: string; filter: DeviceFilter },
): Promise<{ total: number; quota: number }> {
  const { q } = input.filter;
  const others = Object.entries(input.filter).filter(([key, value]) => key !== 'q' && value !== undefined);
  // A search alone is counted in the search terms, without reading a device.
  const searchAlone = q !== undefined && indexable(q) && others.length === 0;
  const counted = searchAlone
    ? searchTerms(input.accountId, q)
    : whereClause(input.accountId, input.filter, indexable(q) ? 'terms' : 'rows');
  const total = searchAlone
    ? `SELECT count(*) FROM (${counted.sql}) matches`
    : `SELECT count(*) FROM devices d WHERE ${counted.sql}`;
  const result = await db.raw<{ rows: Array<{ total: string | number; quota: number }> }>(
    `SELECT (${total}) AS total, a.quota FROM accounts a WHERE a.id = ?`,
    [...counted.bindings, input.accountId],
  );
  const row = result.rows[0];
  return { total: Number(row?.total ?? 0), quota: row?.quota ?? 0 };
}

/** The account's device quota (the streamed list's header); 0 for an unknown account. */
export async function selectQuota(db: Db, input: { accountId: string }): Promise<number> {
  const row: { quota: number } | undefined = await db('accounts').where({ id: input.accountId }).first('quota');
  return row?.quota ?? 0;
}
