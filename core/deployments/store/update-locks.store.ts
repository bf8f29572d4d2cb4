import type { Knex } from 'knex';
import type { Db } from '../../db/db';
import type { SiteFreeze } from '../../sites/site-schedule';
import type { HoldInputs, LockState } from '../update-locks';

// Device update locks (device_update_locks), and what the views need to tell held updates.

/** Whether the device is an emergency-lighting fixture (its own flag, else its model's), and its lock row. */
export async function readLockSubject(
  trx: Knex.Transaction,
  input: { accountId: string; deviceId: string },
): Promise<{ emergency: boolean; durationTestAt: Date | null } | null> {
  const row = (
    await trx.raw<{ rows: Array<{ emergency: boolean; duration_test_at: Date | null }> }>(
      `SELECT coalesce(d.emergency_lighting, m.emergency_lighting) AS emergency, l.duration_test_at
         FROM devices d JOIN models m ON m.id = d.model_id
         LEFT JOIN device_update_locks l ON l.device_id = d.id
        WHERE d.id = ? AND d.account_id = ?`,
      [input.deviceId, input.accountId],
    )
  ).rows[0];
  return row ? { emergency: row.emergency, durationTestAt: row.duration_test_at } : null;
}

export async function writeLock(
  trx: Knex.Transaction,
  input: { accountId: string; deviceId: string; state: LockState },
): Promise<void> {
  const { state } = input;
  await trx.raw(
    `INSERT INTO device_update_locks (device_id, account_id, until, reason, requested_until, set_at, duration_test_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (device_id) DO UPDATE SET until = EXCLUDED.until, reason = EXCLUDED.reason,
       requested_until = EXCLUDED.requested_until, set_at = EXCLUDED.set_at, duration_test_at = EXCLUDED.duration_test_at`,
    [
      input.deviceId,
      input.accountId,
      state.until,
      state.reason,
      state.requestedUntil,
      state.setAt,
      state.durationTestAt,
    ],
  );
}

/**
 * A lock that arrives while the device's command is `sent` (published, not started: no progress
 * yet) takes the command back: the update is queued (held) again, without a deadline, its step
 * recorded in the device's history, and the device no longer shows `updating`; the same job
 * goes out when the lock ends. Returns the updates taken back.
 */
export async function requeueSentUpdates(
  trx: Knex.Transaction,
  input: { accountId: string; deviceId: string; now: Date; reason: string },
): Promise<Array<{ id: string; deploymentId: string; targetVersion: string }>> {
  const rows = (
    await trx.raw<{ rows: Array<{ id: string; deployment_id: string; target_version: string }> }>(
      `WITH back AS (
         UPDATE device_updates SET state = 'queued', deadline_at = NULL, state_changed_at = ?
          WHERE device_id = ? AND account_id = ? AND state = 'sent'
         RETURNING id, account_id, device_id, deployment_id, target_version, attempts
       ), history AS (
         INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
         SELECT account_id, device_id, 'update_step',
                jsonb_build_object('job_id', id, 'deployment_id', deployment_id, 'target_version', target_version,
                                   'attempts', attempts, 'state', 'queued', 'held', ?::text), ?
           FROM back
       )
       SELECT id, deployment_id, target_version FROM back`,
      [input.now, input.deviceId, input.accountId, input.reason, input.now],
    )
  ).rows;
  if (rows.length === 0) return [];
  await trx.raw(
    `UPDATE devices SET current_update_id = NULL, status = CASE WHEN connectivity = 'online' THEN 'online' ELSE 'offline' END, updated_at = ?
      WHERE id = ? AND current_update_id = ANY(?::uuid[])`,
    [input.now, input.deviceId, rows.map((r) => r.id)],
  );
  return rows.map((r) => ({ id: r.id, deploymentId: r.deployment_id, targetVersion: r.target_version }));
}

/** The columns a query selects to tell a held update (device `d`, its lock `l`, its site `s`). */
export const HOLD_COLUMNS =
  'l.until AS lock_until, l.reason AS lock_reason, s.time_zone AS hold_time_zone, s.freezes AS hold_freezes';
/** The device's lock as `l` (after a join of the devices as `d`); HOLD_COLUMNS also reads its site as `s`. */
export const LOCK_JOIN = 'LEFT JOIN device_update_locks l ON l.device_id = d.id';
export const HOLD_JOINS = `${LOCK_JOIN} LEFT JOIN sites s ON s.id = d.site_id`;

export interface HoldRow {
  lock_until: Date | string | null;
  lock_reason: string | null;
  hold_time_zone: string | null;
  hold_freezes: SiteFreeze[] | string | null;
}

export const toHoldInputs = (r: HoldRow): HoldInputs => ({
  lockUntil: r.lock_until === null ? null : new Date(r.lock_until),
  lockReason: r.lock_reason,
  siteTimeZone: r.hold_time_zone,
  siteFreezes: typeof r.hold_freezes === 'string' ? (JSON.parse(r.hold_freezes) as SiteFreeze[]) : r.hold_freezes,
});

/**
 * The statement behind queuedUpdatesMaybeHeld (exported so tests can EXPLAIN exactly what runs).
 * It starts from the devices that may be held, which are few, rather than from the deployments'
 * updates: read the other way, each view of a deployment of 100,000 devices joined all of them
 * (286 ms of PostgreSQL, with nothing held). The devices come as an array, computed before the
 * updates are read: as a join, the planner guessed a site's devices as the whole account and
 * hashed all 100,000 updates again (113 ms).
 */
export function queuedUpdatesMaybeHeldQuery(input: { accountId: string; deploymentIds: string[]; now: Date }): {
  sql: string;
  bindings: Knex.Value[];
} {
  return {
    sql: `SELECT u.deployment_id, d.serial, ${HOLD_COLUMNS}
            FROM device_updates u JOIN devices d ON d.id = u.device_id ${HOLD_JOINS}
           WHERE u.device_id = ANY (ARRAY(
                   SELECT held.device_id FROM device_update_locks held WHERE held.account_id = ? AND held.until > ?
                   UNION ALL
                   SELECT frozen.id FROM sites fs
                     JOIN devices frozen ON frozen.account_id = fs.account_id AND frozen.site_id = fs.id
                    WHERE fs.account_id = ? AND fs.freezes <> '[]'::jsonb))
             AND u.deployment_id = ANY(?::uuid[]) AND u.state = 'queued'
           ORDER BY d.serial`,
    bindings: [input.accountId, input.now, input.accountId, input.deploymentIds],
  };
}

/**
 * The queued updates of these deployments (all of the account's) that may be held now: their
 * device has a lock that has not ended, or a site with freezes (the caller evaluates them in the
 * site's zone).
 */
export async function queuedUpdatesMaybeHeld(
  db: Db,
  input: { accountId: string; deploymentIds: string[]; now: Date },
): Promise<Array<HoldRow & { deployment_id: string; serial: string }>> {
  if (input.deploymentIds.length === 0) return [];
  const { sql, bindings } = queuedUpdatesMaybeHeldQuery(input);
  return (await db.raw<{ rows: Array<HoldRow & { deployment_id: string; serial: string }> }>(sql, bindings)).rows;
}

/** The devices a deploy would target (`where` over devices `d`) that may be held now. */
export async function targetsMaybeHeld(
  db: Db,
  input: { where: { sql: string; bindings: Knex.Value[] }; now: Date },
): Promise<Array<HoldRow & { serial: string }>> {
  return (
    await db.raw<{ rows: Array<HoldRow & { serial: string }> }>(
      `SELECT d.serial, ${HOLD_COLUMNS} FROM devices d ${HOLD_JOINS}
        WHERE ${input.where.sql} AND (l.until > ? OR s.freezes <> '[]'::jsonb)
        ORDER BY d.serial`,
      [...input.where.bindings, input.now],
    )
  ).rows;
}

interface LockViewRow {
  serial: string;
  device_flag: boolean | null;
  model_flag: boolean;
  until: Date | null;
  reason: string | null;
  requested_until: Date | null;
  set_at: Date | null;
  duration_test_at: Date | null;
}

/** A device of the account with its emergency flags and its lock row (absent: none yet); null when not the account's. */
export async function readDeviceLock(
  db: Db,
  input: { accountId: string; serial: string },
): Promise<LockViewRow | null> {
  const row = (
    await db.raw<{ rows: LockViewRow[] }>(
      `SELECT d.serial, d.emergency_lighting AS device_flag, m.emergency_lighting AS model_flag,
              l.until, l.reason, l.requested_until, l.set_at, l.duration_test_at
         FROM devices d JOIN models m ON m.id = d.model_id
         LEFT JOIN device_update_locks l ON l.device_id = d.id
        WHERE d.account_id = ? AND d.serial = ?`,
      [input.accountId, input.serial],
    )
  ).rows[0];
  return row ?? null;
}

/** Sets a device's own emergency flag (null: its model's); false when the account has no such device. */
export async function writeDeviceEmergencyFlag(
  db: Db,
  input: { accountId: string; serial: string; value: boolean | null },
): Promise<boolean> {
  const n = await db('devices')
    .where({ account_id: input.accountId, serial: input.serial })
    .update({ emergency_lighting: input.value });
  return n > 0;
}

/** Sets a model's emergency flag; false when the account has no such model. */
export async function writeModelEmergencyFlag(
  db: Db,
  input: { accountId: string; name: string; value: boolean },
): Promise<boolean> {
  const n = await db('models')
    .where({ account_id: input.accountId, name: input.name })
    .update({ emergency_lighting: input.value });
  return n > 0;
}
