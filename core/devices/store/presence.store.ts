import type { Knex } from 'knex';
import { arrayLiteral, sparseArrayLiteral } from '../../db/array-literal';
import { preparedRaw } from '../../db/prepared';
import type { Connectivity, DeviceStatus } from '../device-types';
import type { PresenceChange, PresenceRow } from '../presence-changes';

/**
 * Presence writes: each is ONE statement over many devices (a flush of the heartbeat ingest, a
 * page of the timeout sweep, a page of the restart reconciliation) that returns only the rows
 * whose status, connectivity, firmware or applied configuration changed.
 */

interface ChangedRow {
  id: string;
  account_id: string;
  serial: string;
  prev_connectivity: Connectivity;
  prev_status: DeviceStatus;
  prev_firmware: string | null;
  connectivity: Connectivity;
  status: DeviceStatus;
  firmware: string | null;
  ip: string | null;
  last_seen: Date | null;
  current_update_id: string | null;
  firmware_reported: boolean;
  prev_reported_config_version: number | null;
  reported_config_version: number | null;
}

/**
 * The columns of a ChangedRow, all that the flush sends back of `written` (whose other columns
 * feed the statement's own deadlines and connection days): node-postgres parses every column of
 * every row it receives, a timestamp into a Date (the largest part of a flush's client side for
 * connecting devices, which all come back).
 */
const CHANGED_COLUMN_NAMES = [
  'id',
  'account_id',
  'serial',
  'prev_connectivity',
  'prev_status',
  'prev_firmware',
  'connectivity',
  'status',
  'firmware',
  'ip',
  'last_seen',
  'current_update_id',
  'firmware_reported',
  'prev_reported_config_version',
  'reported_config_version',
] as const satisfies ReadonlyArray<keyof ChangedRow>;
const CHANGED_COLUMNS = everyField(CHANGED_COLUMN_NAMES).join(', ');

/** The names, refused by the compiler unless they list every field of ChangedRow (one left out would come back undefined). */
function everyField<const T extends ReadonlyArray<keyof ChangedRow>>(
  names: T & ([Exclude<keyof ChangedRow, T[number]>] extends [never] ? unknown : never),
): T {
  return names;
}

function toChange(row: ChangedRow): PresenceChange {
  return {
    deviceId: row.id,
    accountId: row.account_id,
    serial: row.serial,
    prevConnectivity: row.prev_connectivity,
    prevStatus: row.prev_status,
    prevFirmware: row.prev_firmware,
    connectivity: row.connectivity,
    status: row.status,
    firmware: row.firmware,
    ip: row.ip,
    lastSeen: row.last_seen,
    currentUpdateId: row.current_update_id,
    firmwareReported: row.firmware_reported,
    prevReportedConfigVersion: row.prev_reported_config_version,
    reportedConfigVersion: row.reported_config_version,
  };
}

/**
 * Writes one coalesced batch with ONE `UPDATE devices ... FROM unnest(...)` statement. Status:
 * `offline` when disconnected; while connected `updating` if an update is in progress
 * (`current_update_id`, set by the OTA engine), else `online`. Applied configuration reports
 * ride in the same statement (a reconnect storm of 10,000 devices also reports 10,000 configs).
 * `nodeId` is written to `devices.broker_node` of devices that connect. Rows should come sorted
 * by device id: a stable lock order keeps two concurrent writers from deadlocking.
 */
export async function applyPresenceBatch(
  trx: Knex.Transaction,
  input: { nodeId: string; now: Date; rows: PresenceRow[] },
): Promise<PresenceChange[]> {
  const { nodeId, now, rows } = input;
  const ids = arrayLiteral(rows.map((r) => r.deviceId));
  const result = await preparedRaw<{ rows: ChangedRow[] }>(
    trx,
    `WITH written AS (
         UPDATE devices d SET
           connectivity = COALESCE(u.connectivity, d.connectivity),
           status = CASE WHEN COALESCE(u.connectivity, d.connectivity) = 'offline' THEN 'offline'
                         WHEN d.current_update_id IS NOT NULL THEN 'updating' ELSE 'online' END,
           -- Two clocks: last_seen is the time of the last heartbeat (the specification's field);
           -- heard_at the last sign of life (connect, heartbeat, status online), which presence uses.
           last_seen = COALESCE(u.seen_at, d.last_seen),
           heard_at = COALESCE(u.heard_at, d.heard_at),
           firmware = COALESCE(u.firmware, d.firmware),
           firmware_key = COALESCE(u.firmware_key, d.firmware_key),
           ip = COALESCE(u.ip, d.ip),
           uptime_s = COALESCE(u.uptime_s, d.uptime_s),
           rssi = COALESCE(u.rssi, d.rssi),
           broker_node = CASE WHEN u.connectivity = 'online' THEN ?::text ELSE d.broker_node END,
           -- Only the current desired version counts as applied: its content is the desired configuration.
           reported_config_version = CASE WHEN u.reported_version = d.desired_config_version THEN u.reported_version ELSE d.reported_config_version END,
           reported_config = CASE WHEN u.reported_version = d.desired_config_version THEN d.desired_config ELSE d.reported_config END,
           -- Refusals: counts add up, the newest reason, value and time replace the older ones.
           -- A valid firmware clears an invalid one reported before it (see HeartbeatIngest).
           firmware_reported_invalid = CASE WHEN u.firmware_invalid IS NOT NULL THEN u.firmware_invalid
                                            WHEN u.firmware IS NOT NULL THEN NULL
                                            ELSE d.firmware_reported_invalid END,
           refused_messages = CASE WHEN u.refused_messages IS NULL THEN d.refused_messages
                                   ELSE d.refused_messages || (SELECT jsonb_object_agg(n.key,
                                          COALESCE((d.refused_messages ->> n.key)::bigint, 0) + n.value::bigint)
                                        FROM jsonb_each_text(u.refused_messages) n) END,
           last_refused_message = COALESCE(u.last_refused_message, d.last_refused_message),
           refused_fields = CASE WHEN u.refused_fields IS NULL THEN d.refused_fields
                                 ELSE d.refused_fields || (SELECT jsonb_object_agg(n.key, n.value || jsonb_build_object('count',
                                        COALESCE((d.refused_fields -> n.key ->> 'count')::bigint, 0) + (n.value ->> 'count')::bigint))
                                      FROM jsonb_each(u.refused_fields) n) END,
           updated_at = CASE WHEN COALESCE(u.connectivity, d.connectivity) <> d.connectivity
                              OR u.firmware IS DISTINCT FROM d.firmware AND u.firmware IS NOT NULL THEN ?::timestamptz
                             ELSE d.updated_at END
         FROM (SELECT x.id, x.seen_at, x.heard_at, x.firmware, x.firmware_key, x.ip, x.uptime_s, x.rssi, x.reported_version,
                      x.firmware_invalid, x.refused_messages::jsonb AS refused_messages,
                      x.last_refused_message::jsonb AS last_refused_message, x.refused_fields::jsonb AS refused_fields,
                      -- Cluster mode: a disconnect seen by this process is ignored once the device
                      -- has connected to another process (its row names that process).
                      CASE WHEN x.connectivity = 'offline' AND old.broker_node IS DISTINCT FROM ?::text
                           THEN NULL ELSE x.connectivity END AS connectivity,
                      old.connectivity AS prev_connectivity, old.status AS prev_status, old.firmware AS prev_firmware,
                      old.reported_config_version AS prev_reported_config_version,
                      -- The exact presence deadline this news gives (null without a sighting).
                      x.heard_at + make_interval(secs => old.heartbeat_interval_s * 3) AS deadline,
                      -- Unexpected reboots: uptime went back (against the stored value, or between the
                      -- heartbeats of this row) with no update in progress (an update reboots the device).
                      CASE WHEN old.current_update_id IS NOT NULL THEN 0
                           ELSE COALESCE(x.uptime_drops, 0) + CASE WHEN COALESCE(x.first_uptime_s, x.uptime_s) < old.uptime_s THEN 1 ELSE 0 END
                      END AS reboots,
                      -- Reconnects: sessions opened by a device heard before, outside an update in progress.
                      CASE WHEN old.current_update_id IS NOT NULL THEN 0
                           ELSE GREATEST(COALESCE(x.connects, 0) - CASE WHEN old.heard_at IS NULL THEN 1 ELSE 0 END, 0)
                      END AS reconnects,
                      x.heard_at IS NOT NULL AND (old.heard_at IS NULL
                        OR (x.heard_at AT TIME ZONE 'UTC')::date <> (old.heard_at AT TIME ZONE 'UTC')::date
                        OR (x.firmware IS NOT NULL AND x.firmware IS DISTINCT FROM old.firmware)) AS new_day_or_version
               FROM unnest(?::uuid[], ?::timestamptz[], ?::timestamptz[], ?::text[], ?::text[], ?::text[], ?::int[], ?::int[], ?::text[], ?::int[],
                           ?::text[], ?::text[], ?::text[], ?::text[], ?::int[], ?::int[], ?::int[])
                      AS x(id, seen_at, heard_at, firmware, firmware_key, ip, uptime_s, rssi, connectivity, reported_version,
                           firmware_invalid, refused_messages, last_refused_message, refused_fields,
                           first_uptime_s, uptime_drops, connects)
               -- Each device's old values by its key, and the updated rows found by the ids again:
               -- a flush names a few hundred of the fleet's devices, and joined by id alone the
               -- planner hashed them against a scan of every device. Measured in the embedded
               -- database, 5,000 devices and 400 rows a flush: the scan and hash were half of the
               -- update. LIMIT 1 (the id is the key) keeps this lookup from becoming such a join.
               CROSS JOIN LATERAL (SELECT o.connectivity, o.status, o.firmware, o.reported_config_version,
                                          o.heartbeat_interval_s, o.current_update_id, o.uptime_s, o.heard_at, o.broker_node
                                     FROM devices o WHERE o.id = x.id LIMIT 1) old) u
         WHERE d.id = u.id AND d.id = ANY (?::uuid[])
         RETURNING d.id, d.account_id, d.serial, u.prev_connectivity, u.prev_status,
                   u.prev_firmware, d.connectivity, d.status, d.firmware, d.ip, d.last_seen,
                   d.current_update_id, (u.firmware IS NOT NULL) AS firmware_reported,
                   u.prev_reported_config_version, d.reported_config_version,
                   d.model_id, d.heard_at, u.reboots, u.reconnects, u.new_day_or_version,
                   u.deadline, d.heartbeat_interval_s),
       -- The sweep's deadline (device_presence_deadlines, a row per online device): a lower bound
       -- of the exact one (heard_at + 3 intervals), moved only by a whole interval or more (or
       -- earlier, when the interval shrank), so most flushes write none. Kept off \`devices\`, whose
       -- rows a presence change then updates in place (HOT: no index covers what it changes). The
       -- sweep checks heard_at before it marks anyone offline. Device rows are locked first (the
       -- UPDATE above), so two writers of one deadline never wait on each other in reverse order.
       deadline_set AS (
         INSERT INTO device_presence_deadlines (device_id, offline_after)
         SELECT w.id, COALESCE(w.deadline, ?::timestamptz)
           FROM written w LEFT JOIN device_presence_deadlines cur ON cur.device_id = w.id
          WHERE w.connectivity = 'online'
            AND (cur.device_id IS NULL
                 OR w.deadline < cur.offline_after
                 OR w.deadline - make_interval(secs => w.heartbeat_interval_s) >= cur.offline_after)
         ON CONFLICT (device_id) DO UPDATE SET offline_after = EXCLUDED.offline_after),
       deadline_cleared AS (
         DELETE FROM device_presence_deadlines p USING written w
          WHERE p.device_id = w.id AND w.connectivity = 'offline'),
       -- Connection days (docs/fixture-health.md "Unexpected reboots and reconnects"): a row per
       -- device, UTC day and firmware, made by the first news of the day or of a new version and
       -- counting reboots and reconnects; a steady heartbeat matches none of this (no write).
       counted AS (
         INSERT INTO device_connection_days AS c (device_id, day, firmware, account_id, model, unexpected_reboots, reconnects)
         SELECT w.id, (w.heard_at AT TIME ZONE 'UTC')::date, COALESCE(w.firmware, ''), w.account_id, m.name, w.reboots, w.reconnects
           FROM written w JOIN models m ON m.id = w.model_id
          WHERE w.heard_at IS NOT NULL AND (w.new_day_or_version OR w.reboots > 0 OR w.reconnects > 0)
         ON CONFLICT (device_id, day, firmware) DO UPDATE
            SET unexpected_reboots = c.unexpected_reboots + EXCLUDED.unexpected_reboots,
                reconnects = c.reconnects + EXCLUDED.reconnects)
         -- Only what changed comes back: a steady heartbeat (nearly every row) is not sent to Node.
         SELECT ${CHANGED_COLUMNS} FROM written
          WHERE status <> prev_status OR connectivity <> prev_connectivity
             OR (firmware_reported AND (firmware IS DISTINCT FROM prev_firmware OR current_update_id IS NOT NULL))
             OR reported_config_version IS DISTINCT FROM prev_reported_config_version`,
    // Whole columns as array literals, built in one pass (core/db/array-literal.ts): node-postgres's
    // own formatting of these arrays took milliseconds of the event loop per flush. A column no
    // row sets is sent as null (unnest pads it with nulls): the ids carry every row.
    [
      nodeId,
      now,
      nodeId,
      ids,
      sparseArrayLiteral(rows.map((r) => r.seenAt)),
      sparseArrayLiteral(rows.map((r) => r.heardAt)),
      sparseArrayLiteral(rows.map((r) => r.firmware)),
      sparseArrayLiteral(rows.map((r) => r.firmwareKey)),
      sparseArrayLiteral(rows.map((r) => r.ip)),
      sparseArrayLiteral(rows.map((r) => r.uptimeS)),
      sparseArrayLiteral(rows.map((r) => r.rssi)),
      sparseArrayLiteral(rows.map((r) => r.connectivity)),
      sparseArrayLiteral(rows.map((r) => r.reportedConfigVersion)),
      sparseArrayLiteral(rows.map((r) => r.firmwareInvalid)),
      sparseArrayLiteral(rows.map((r) => jsonOrNull(r.refusals?.messages))),
      sparseArrayLiteral(rows.map((r) => jsonOrNull(r.refusals?.lastMessage))),
      sparseArrayLiteral(rows.map((r) => jsonOrNull(r.refusals?.fields))),
      // Only where it differs from the row's uptime (the statement falls back to that): a row of
      // one heartbeat has the same first and last uptime.
      sparseArrayLiteral(rows.map((r) => (r.firstUptimeS === r.uptimeS ? null : r.firstUptimeS))),
      sparseArrayLiteral(rows.map((r) => r.uptimeDrops || null)),
      sparseArrayLiteral(rows.map((r) => r.connects || null)),
      ids,
      now,
    ],
  );
  return result.rows.map(toChange);
}

const jsonOrNull = (value: object | null | undefined): string | null => (value ? JSON.stringify(value) : null);

/**
 * One page of the timeout sweep: every online device whose presence deadline passed (3 of its
 * heartbeat intervals without news) goes offline. One indexed range scan on
 * `device_presence_deadlines`; since a deadline there is a lower bound (see applyPresenceBatch),
 * each candidate's exact deadline is checked against `heard_at` (the last sign of life: connect,
 * heartbeat or status online; `last_seen` is the last heartbeat only), and one still alive gets its
 * exact deadline instead. Device rows are locked first, skipping those a flush holds, as every
 * writer of deadlines does. A deadline left by a device already offline is dropped.
 * `examined`: the candidates judged (a full page means there may be more).
 */
export async function sweepPresenceDeadlines(
  trx: Knex.Transaction,
  input: { now: Date; limit: number },
): Promise<{ offline: PresenceChange[]; examined: number }> {
  const { now, limit } = input;
  const result = await trx.raw<{ rows: Array<ChangedRow & { expired: boolean }> }>(
    `WITH due AS (
         SELECT d.id, d.status, d.connectivity, d.firmware,
                d.heard_at + make_interval(secs => d.heartbeat_interval_s * 3) AS deadline
           FROM devices d
          WHERE d.id = ANY (ARRAY(SELECT p.device_id FROM device_presence_deadlines p
                                   WHERE p.offline_after < ?::timestamptz ORDER BY p.offline_after LIMIT ?))
            FOR UPDATE OF d SKIP LOCKED),
       judged AS (
         SELECT due.*, due.connectivity <> 'online' AS stale,
                due.connectivity = 'online' AND (due.deadline IS NULL OR due.deadline < ?::timestamptz) AS expired
           FROM due),
       marked AS (
         UPDATE devices d SET connectivity = 'offline', status = 'offline', updated_at = ?::timestamptz
           FROM judged j
          WHERE d.id = j.id AND j.expired
         RETURNING d.id, d.account_id, d.serial, j.connectivity AS prev_connectivity, j.status AS prev_status,
                   j.firmware AS prev_firmware, d.connectivity, d.status, d.firmware, d.ip, d.last_seen,
                   d.current_update_id, false AS firmware_reported,
                   d.reported_config_version AS prev_reported_config_version, d.reported_config_version),
       moved AS (
         UPDATE device_presence_deadlines p SET offline_after = j.deadline
           FROM judged j
          WHERE p.device_id = j.id AND NOT j.expired AND NOT j.stale),
       cleared AS (
         DELETE FROM device_presence_deadlines p USING judged j
          WHERE p.device_id = j.id AND (j.expired OR j.stale))
     -- A row per candidate judged: the change where it went offline, nulls where it did not.
     SELECT m.*, m.id IS NOT NULL AS expired FROM judged j LEFT JOIN marked m ON m.id = j.id`,
    [now, limit, now, now],
  );
  return {
    offline: result.rows.filter((r) => r.expired).map(toChange),
    examined: result.rows.length,
  };
}

/** Rows per page of markOnlineDevicesOffline (the statement's LIMIT). */
export const RESTART_PAGE = 5000;

/**
 * One page (at most RESTART_PAGE) of devices marked offline after a restart: every online
 * device, or only those connected to one of `onlyNodes`.
 */
export async function markOnlineDevicesOffline(
  trx: Knex.Transaction,
  input: { now: Date; onlyNodes: string[] | null },
): Promise<PresenceChange[]> {
  const { now } = input;
  const filter = input.onlyNodes ? 'AND broker_node = ANY(?::text[])' : '';
  const result = await trx.raw<{ rows: ChangedRow[] }>(
    `WITH marked AS (
         UPDATE devices d SET connectivity = 'offline', status = 'offline', updated_at = ?::timestamptz
           FROM (SELECT id, status, connectivity, firmware FROM devices
                 WHERE connectivity = 'online' ${filter} ORDER BY id LIMIT 5000 FOR UPDATE) old
           WHERE d.id = old.id
           RETURNING d.id, d.account_id, d.serial, old.connectivity AS prev_connectivity, old.status AS prev_status,
                     old.firmware AS prev_firmware, d.connectivity, d.status, d.firmware, d.ip, d.last_seen,
                     d.current_update_id, false AS firmware_reported,
                     d.reported_config_version AS prev_reported_config_version, d.reported_config_version),
       cleared AS (DELETE FROM device_presence_deadlines p USING marked m WHERE p.device_id = m.id)
     SELECT * FROM marked`,
    input.onlyNodes ? [now, input.onlyNodes] : [now],
  );
  return result.rows.map(toChange);
}
