import type { Knex } from 'knex';
import type { NewDeviceEvent } from '../device-history';
import type { DeviceHistoryEntry } from '../device-types';
import type { Db } from '../../db/db';

interface HistoryRow {
  id: number | string;
  type: string;
  data: Record<string, unknown>;
  occurred_at: Date | string;
}

function toEntry(row: HistoryRow): DeviceHistoryEntry {
  return { id: Number(row.id), type: row.type, occurredAt: new Date(row.occurred_at).toISOString(), data: row.data };
}

/** Writes history rows in the caller's transaction; their ids follow the order of `events`. */
export async function appendDeviceEvents(db: Db, input: { now: Date; events: NewDeviceEvent[] }): Promise<void> {
  if (input.events.length === 0) return;
  // One JSON document for the whole batch, unpacked by PostgreSQL (as the outbox does). The query
  // builder's multi-row insert compiled and escaped five bind parameters per row, 25,000 per
  // chunk of 5,000: a reconnect storm's status changes cost Node more than the insert itself.
  // Ids (the history cursor) follow the order of the list.
  const rows = input.events.map((e) => ({
    a: e.accountId,
    d: e.deviceId,
    t: e.type,
    x: e.data ?? {},
    o: e.occurredAt ?? input.now,
  }));
  await db.raw(
    `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT (e ->> 'a')::uuid, (e ->> 'd')::uuid, e ->> 't', e -> 'x', (e ->> 'o')::timestamptz
       FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY AS r(e, ord)
      ORDER BY ord`,
    [JSON.stringify(rows)],
  );
}

/** One device's entries, newest first, older than `beforeId` when given; at most `limit`. */
export async function selectHistoryPage(
  db: Db,
  input: { accountId: string; deviceId: string; beforeId: number | null; limit: number },
): Promise<DeviceHistoryEntry[]> {
  const query = db('device_events')
    .where({ device_id: input.deviceId, account_id: input.accountId })
    .orderBy('id', 'desc')
    .limit(input.limit);
  if (input.beforeId !== null) query.where('id', '<', input.beforeId);
  const rows: HistoryRow[] = await query.select('id', 'type', 'data', 'occurred_at');
  return rows.map(toEntry);
}

/**
 * The newest `limit` entries of each of these devices in ONE statement (a list page asking for
 * every device's recent history must not run a query per device), grouped by device id, newest
 * first. Devices without history are absent.
 */
export async function selectHistoryHeads(
  db: Db,
  input: { accountId: string; deviceIds: string[]; limit: number },
): Promise<Map<string, DeviceHistoryEntry[]>> {
  const result = await db.raw<{ rows: Array<HistoryRow & { device_id: string }> }>(
    `SELECT id, device_id, type, data, occurred_at FROM (
         SELECT e.*, row_number() OVER (PARTITION BY e.device_id ORDER BY e.id DESC) AS rn
           FROM device_events e WHERE e.account_id = ? AND e.device_id = ANY(?::uuid[])) ranked
        WHERE rn <= ? ORDER BY device_id, id DESC`,
    [input.accountId, input.deviceIds, input.limit] as unknown as readonly string[],
  );
  const heads = new Map<string, DeviceHistoryEntry[]>();
  for (const row of result.rows) {
    const entries = heads.get(row.device_id) ?? [];
    if (entries.length === 0) heads.set(row.device_id, entries);
    entries.push(toEntry(row));
  }
  return heads;
}

/** Unclaim: the device's history goes with it (history rows carry no foreign key). */
export async function deleteHistoryOfDevice(trx: Knex.Transaction, input: { deviceId: string }): Promise<void> {
  await trx('device_events').where({ device_id: input.deviceId }).delete();
}
