import type { Db } from '../../db/db';
import type { LocalWindow, SiteFreeze } from '../site-schedule';
import type { Site, SiteRef } from '../site-types';

/** Reads and writes of `sites`. Every statement is scoped by `account_id` (tenant isolation). */

interface SiteRow {
  id: string;
  account_id: string;
  name: string;
  time_zone: string;
  address: string | null;
  customer_ref: string | null;
  maintenance_window: LocalWindow | null;
  freezes: SiteFreeze[] | null;
  created_at: Date;
  updated_at: Date;
  device_count?: number | string | null;
}

const toSite = (row: SiteRow): Site => ({
  id: row.id,
  name: row.name,
  timeZone: row.time_zone,
  address: row.address,
  customerRef: row.customer_ref,
  maintenanceWindow: row.maintenance_window,
  freezes: row.freezes ?? [],
  deviceCount: Number(row.device_count ?? 0),
  createdAt: new Date(row.created_at).toISOString(),
  updatedAt: new Date(row.updated_at).toISOString(),
});

const DEVICE_COUNT =
  '(SELECT count(*)::int FROM devices d WHERE d.account_id = s.account_id AND d.site_id = s.id) AS device_count';

export interface SiteColumns {
  name: string;
  timeZone: string;
  address: string | null;
  customerRef: string | null;
  maintenanceWindow: LocalWindow | null;
  freezes: SiteFreeze[];
}

const toColumns = (c: Partial<SiteColumns>): Record<string, unknown> => {
  const row: Record<string, unknown> = {};
  if (c.name !== undefined) row.name = c.name;
  if (c.timeZone !== undefined) row.time_zone = c.timeZone;
  if (c.address !== undefined) row.address = c.address;
  if (c.customerRef !== undefined) row.customer_ref = c.customerRef;
  // jsonb from text: knex would send a JS array as a PostgreSQL array literal.
  if (c.maintenanceWindow !== undefined)
    row.maintenance_window = c.maintenanceWindow === null ? null : JSON.stringify(c.maintenanceWindow);
  if (c.freezes !== undefined) row.freezes = JSON.stringify(c.freezes);
  return row;
};

export async function insertSite(
  db: Db,
  input: { id: string; accountId: string; now: Date; site: SiteColumns },
): Promise<Site> {
  await db('sites').insert({
    id: input.id,
    account_id: input.accountId,
    ...toColumns(input.site),
    created_at: input.now,
    updated_at: input.now,
  });
  return (await selectSite(db, { accountId: input.accountId, id: input.id }))!;
}

export async function selectSite(db: Db, input: { accountId: string; id: string }): Promise<Site | null> {
  const result = await db.raw<{ rows: SiteRow[] }>(
    `SELECT s.*, ${DEVICE_COUNT} FROM sites s WHERE s.account_id = ? AND s.id = ?`,
    [input.accountId, input.id],
  );
  const row = result.rows[0];
  return row ? toSite(row) : null;
}

/** The account's site with this id, or else with this name (case-insensitive). */
export async function selectSiteRef(
  db: Db,
  input: { accountId: string; id: string | null; name: string },
): Promise<SiteRef | null> {
  const query = db('sites').where({ account_id: input.accountId });
  if (input.id !== null) query.where({ id: input.id });
  else query.whereRaw('lower(name) = lower(?)', [input.name]);
  const row: { id: string; name: string } | undefined = await query.first('id', 'name');
  return row ?? null;
}

/** A page in name order (then id), after the keys of the previous page's last row. */
export async function selectSitePage(
  db: Db,
  input: { accountId: string; after: { name: string; id: string } | null; limit: number; q: string | null },
): Promise<Site[]> {
  const where = ['s.account_id = ?'];
  const bindings: unknown[] = [input.accountId];
  if (input.q !== null) {
    where.push('s.name ILIKE ?');
    bindings.push(`%${input.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  }
  if (input.after !== null) {
    where.push('(s.name, s.id) > (?, ?::uuid)');
    bindings.push(input.after.name, input.after.id);
  }
  const result = await db.raw<{ rows: SiteRow[] }>(
    `SELECT s.*, ${DEVICE_COUNT} FROM sites s WHERE ${where.join(' AND ')} ORDER BY s.name, s.id LIMIT ${Math.max(1, Math.floor(input.limit))}`,
    bindings as never[],
  );
  return result.rows.map(toSite);
}

export async function countSites(db: Db, input: { accountId: string; q: string | null }): Promise<number> {
  const query = db('sites').where({ account_id: input.accountId });
  if (input.q !== null) query.whereILike('name', `%${input.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  const row = (await query.count<Array<{ n: string | number }>>('* as n'))[0];
  return Number(row?.n ?? 0);
}

/** Null when the account has no such site. */
export async function updateSite(
  db: Db,
  input: { accountId: string; id: string; now: Date; patch: Partial<SiteColumns> },
): Promise<Site | null> {
  const updated = await db('sites')
    .where({ account_id: input.accountId, id: input.id })
    .update({ ...toColumns(input.patch), updated_at: input.now });
  if (updated === 0) return null;
  return selectSite(db, { accountId: input.accountId, id: input.id });
}

/** Deletes the site (its devices become unassigned: ON DELETE SET NULL). Null when there is none. */
export async function deleteSite(db: Db, input: { accountId: string; id: string }): Promise<Site | null> {
  const site = await selectSite(db, input);
  if (!site) return null;
  await db('sites').where({ account_id: input.accountId, id: input.id }).delete();
  return site;
}

/** Sites of the account by id (presenters of device lists). */
export async function selectSiteRefsByIds(db: Db, input: { accountId: string; ids: string[] }): Promise<SiteRef[]> {
  if (input.ids.length === 0) return [];
  return db('sites').where({ account_id: input.accountId }).whereIn('id', input.ids).select('id', 'name');
}
