import type { Knex } from 'knex';
import { versionKey } from '../../shared/version';
import { orderedIdSql } from './job-ids';
import { sqlList } from '../../shared/sql-list';
import { ACTIVE_STATES, IN_FLIGHT_STATES, RETRYABLE_STATES } from '../deployment-types';

/**
 * Target selection of a deployment, as SQL (set-based: scheduling 100,000 targets is a few
 * statements, bench/ota.bench.ts). A target is a device of the account and model, matching the
 * filter, not already on the target version (compared by firmware_key, never as text), and
 * without an update in flight (sent..rebooting): such a device is skipped, deterministically,
 * and keeps its running update (docs/ota.md "Superseding").
 */
export interface TargetQuery {
  accountId: string;
  modelId: string;
  targetVersion: string;
  firmwareLt?: string | undefined;
  status?: string | undefined;
  serials?: string[] | undefined;
  siteId?: string | undefined;
}

/** A device to update to its own version (claims, retries, rollbacks). */
export interface ExplicitTarget {
  deviceId: string;
  firmwareVersionId: string;
  targetVersion: string;
  fromVersion: string | null;
}

/** WHERE over `devices d` (with `?` bindings). */
export function targetWhere(q: TargetQuery): { sql: string; bindings: Knex.Value[] } {
  const parts = ['d.account_id = ?', 'd.model_id = ?', 'd.firmware_key IS DISTINCT FROM ?'];
  const bindings: Knex.Value[] = [q.accountId, q.modelId, versionKey(q.targetVersion)];
  if (q.firmwareLt !== undefined) {
    parts.push('d.firmware_key < ?');
    bindings.push(versionKey(q.firmwareLt));
  }
  if (q.status !== undefined) {
    parts.push('d.status = ?');
    bindings.push(q.status);
  }
  if (q.serials !== undefined) {
    parts.push('d.serial = ANY(?::text[])');
    bindings.push(q.serials);
  }
  if (q.siteId !== undefined) {
    parts.push('d.site_id = ?');
    bindings.push(q.siteId);
  }
  parts.push(
    `NOT EXISTS (SELECT 1 FROM device_updates x WHERE x.device_id = d.id AND x.state IN (${sqlList(IN_FLIGHT_STATES)}))`,
  );
  return { sql: parts.join(' AND '), bindings };
}

/** Count and a sample of serials (dry run). */
export async function previewTargets(
  db: Knex | Knex.Transaction,
  input: { query: TargetQuery; sample: number },
): Promise<{ count: number; sample: string[] }> {
  const where = targetWhere(input.query);
  const sample = input.sample;
  const [countRow, sampleRows] = await Promise.all([
    db.raw<{ rows: Array<{ n: number }> }>(
      `SELECT count(*)::int AS n FROM devices d WHERE ${where.sql}`,
      where.bindings,
    ),
    db.raw<{ rows: Array<{ serial: string }> }>(
      `SELECT d.serial FROM devices d WHERE ${where.sql} ORDER BY d.serial LIMIT ?`,
      [...where.bindings, sample],
    ),
  ]);
  return {
    count: countRow.rows[0]!.n,
    sample: sampleRows.rows.map((r) => r.serial),
  };
}

/** The deploy query's devices counted by the version they report (null: none yet): the dry run's upgrade paths. */
export async function targetVersionsOf(
  db: Knex | Knex.Transaction,
  query: TargetQuery,
): Promise<Array<{ firmware: string | null; devices: number }>> {
  const where = targetWhere(query);
  const rows = await db.raw<{ rows: Array<{ firmware: string | null; n: number }> }>(
    `SELECT d.firmware, count(*)::int AS n FROM devices d WHERE ${where.sql} GROUP BY 1`,
    where.bindings,
  );
  return rows.rows.map((r) => ({ firmware: r.firmware, devices: r.n }));
}

interface SupersededRow {
  id: string;
  deployment_id: string;
}

/** History rows for updates a newer deployment took over; returns the older deployments touched. */
async function recordSuperseded(trx: Knex.Transaction, rows: SupersededRow[], now: Date): Promise<string[]> {
  if (rows.length > 0) {
    await trx.raw(
      `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
       SELECT u.account_id, u.device_id, 'update_step',
              jsonb_build_object('state', 'cancelled', 'job_id', u.id, 'deployment_id', u.deployment_id, 'superseded_by', u.superseded_by, 'target_version', u.target_version), ?
         FROM device_updates u WHERE u.id = ANY(?::uuid[])`,
      [now, rows.map((r) => r.id)],
    );
  }
  return [...new Set(rows.map((r) => r.deployment_id))];
}

/**
 * Supersedes: the queued updates (of older deployments) of this deployment's targets become
 * `cancelled` with `superseded_by` = the new deployment. Returns the older deployments touched.
 */
export async function supersedeQueued(
  trx: Knex.Transaction,
  input: { query: TargetQuery; deploymentId: string; now: Date },
): Promise<string[]> {
  const where = targetWhere(input.query);
  const result = await trx.raw<{ rows: SupersededRow[] }>(
    `UPDATE device_updates u
        SET state = 'cancelled', superseded_by = ?, error = 'superseded', finished_at = ?, state_changed_at = ?, deadline_at = NULL
       FROM devices d
      WHERE u.device_id = d.id AND u.state = 'queued' AND ${where.sql}
      RETURNING u.id, u.deployment_id`,
    [input.deploymentId, input.now, input.now, ...where.bindings],
  );
  return recordSuperseded(trx, result.rows, input.now);
}

/**
 * One INSERT ... SELECT of every target as `queued`, spread over the rollout's cumulative
 * batches in a fixed pseudo-random order (md5 of device and deployment id: canaries come from
 * everywhere, not from one serial range). Returns the number of targets.
 */
export async function insertTargets(
  trx: Knex.Transaction,
  input: { query: TargetQuery; deploymentId: string; firmwareVersionId: string; batches: number[]; now: Date },
): Promise<number> {
  const q = input.query;
  const where = targetWhere(q);
  // The shuffle of 100,000 targets sorts in memory instead of spilling to disk.
  await trx.raw(`SET LOCAL work_mem = '32MB'`);
  // One statement writes the targets and their `queued` history (from the rows it inserted, not
  // a second read of them).
  const result = await trx.raw<{ rowCount: number }>(
    `WITH targets AS (
       INSERT INTO device_updates (id, account_id, deployment_id, device_id, firmware_version_id, from_version, target_version, state, batch, state_changed_at, created_at)
       SELECT ${orderedIdSql('t.rn', input.now)}, ?, ?, t.id, ?, t.firmware, ?, 'queued',
              (SELECT min(b.ord) FROM unnest(?::float8[]) WITH ORDINALITY AS b(pct, ord) WHERE t.rn <= ceil(b.pct * t.n / 100.0)) - 1,
              ?, ?
         FROM (SELECT d.id, d.firmware, row_number() OVER (ORDER BY md5(d.id::text || ?)) AS rn, count(*) OVER () AS n
                 FROM devices d WHERE ${where.sql}) t
       RETURNING id, account_id, device_id, deployment_id, from_version, target_version)
     ${QUEUED_HISTORY_INSERT} FROM targets u`,
    [
      q.accountId,
      input.deploymentId,
      input.firmwareVersionId,
      q.targetVersion,
      input.batches,
      input.now,
      input.now,
      input.deploymentId,
      ...where.bindings,
      input.now,
    ],
  );
  return result.rowCount;
}

/** History of queued updates: `INSERT ... SELECT` over the inserted update rows `u`; one binding (the time). */
const QUEUED_HISTORY_INSERT = `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT u.account_id, u.device_id, 'update_step',
            jsonb_build_object('state', 'queued', 'job_id', u.id, 'deployment_id', u.deployment_id, 'from_version', u.from_version, 'target_version', u.target_version), ?`;

/** Queued updates for explicit devices (claims, retries, rollbacks), each with its own version. */
export async function insertExplicitTargets(
  trx: Knex.Transaction,
  input: { accountId: string; deploymentId: string; now: Date; targets: ExplicitTarget[] },
): Promise<number> {
  if (input.targets.length === 0) return 0;
  // ON CONFLICT on the partial unique index: a device that got another unfinished update in the
  // meantime keeps it (two deployments never fight over one device).
  // As for filter targets, the history comes from the rows inserted (RETURNING gives only those
  // the conflict did not skip).
  const result = await trx.raw<{ rowCount: number }>(
    `WITH targets AS (
       INSERT INTO device_updates (id, account_id, deployment_id, device_id, firmware_version_id, from_version, target_version, state, batch, state_changed_at, created_at)
       SELECT ${orderedIdSql('t.ord', input.now)}, ?, ?, t.device_id, t.fw_id, t.from_version, t.target_version, 'queued', 0, ?, ?
         FROM unnest(?::uuid[], ?::uuid[], ?::text[], ?::text[]) WITH ORDINALITY AS t(device_id, fw_id, target_version, from_version, ord)
       ON CONFLICT (device_id) WHERE state IN (${sqlList(ACTIVE_STATES)}) DO NOTHING
       RETURNING id, account_id, device_id, deployment_id, from_version, target_version)
     ${QUEUED_HISTORY_INSERT} FROM targets u`,
    [
      input.accountId,
      input.deploymentId,
      input.now,
      input.now,
      input.targets.map((t) => t.deviceId),
      input.targets.map((t) => t.firmwareVersionId),
      input.targets.map((t) => t.targetVersion),
      // Knex's binding types have no nullable text[]; PostgreSQL takes the array as is.
      input.targets.map((t) => t.fromVersion) as unknown as string[],
      input.now,
    ],
  );
  return result.rowCount;
}

/** Supersedes the queued updates of these devices (rollbacks and retries take them over). */
export async function supersedeQueuedOfDevices(
  trx: Knex.Transaction,
  input: { accountId: string; deviceIds: string[]; deploymentId: string; now: Date },
): Promise<string[]> {
  if (input.deviceIds.length === 0) return [];
  const result = await trx.raw<{ rows: SupersededRow[] }>(
    `UPDATE device_updates u
        SET state = 'cancelled', superseded_by = ?, error = 'superseded', finished_at = ?, state_changed_at = ?, deadline_at = NULL
      WHERE u.account_id = ? AND u.device_id = ANY(?::uuid[]) AND u.state = 'queued'
      RETURNING u.id, u.deployment_id`,
    [input.deploymentId, input.now, input.now, input.accountId, input.deviceIds],
  );
  return recordSuperseded(trx, result.rows, input.now);
}

/**
 * The devices whose update of this deployment failed or timed out, again to the same version:
 * the end of their upgrade path when a hop failed, from the version they run now (the retry
 * plans its own path from there).
 */
export async function retryTargetsOf(db: Knex | Knex.Transaction, deploymentId: string): Promise<ExplicitTarget[]> {
  const rows: Array<{
    device_id: string;
    firmware: string | null;
    firmware_version_id: string;
    target_version: string;
  }> = await db('device_updates as u')
    .join('devices as d', 'd.id', 'u.device_id')
    .where('u.deployment_id', deploymentId)
    .whereIn('u.state', RETRYABLE_STATES)
    .whereNull('u.next_hop_id')
    .select(
      'u.device_id',
      'd.firmware',
      db.raw('COALESCE(u.final_firmware_version_id, u.firmware_version_id) AS firmware_version_id'),
      db.raw('COALESCE(u.final_version, u.target_version) AS target_version'),
    );
  return rows.map((r) => ({
    deviceId: r.device_id,
    firmwareVersionId: r.firmware_version_id,
    targetVersion: r.target_version,
    fromVersion: r.firmware,
  }));
}

/** A device this deployment changed (its update succeeded), and the version it had before. */
export interface ChangedDevice {
  deviceId: string;
  previousVersion: string;
  /** What it reports now. */
  firmware: string | null;
}

/** The devices this deployment updated that had a known version before (what a rollback returns). */
export async function changedDevicesOf(db: Knex | Knex.Transaction, deploymentId: string): Promise<ChangedDevice[]> {
  const rows: Array<{ device_id: string; from_version: string; firmware: string | null; model_id: string }> = await db(
    'device_updates as u',
  )
    .join('devices as d', 'd.id', 'u.device_id')
    .where('u.deployment_id', deploymentId)
    .where('u.state', 'succeeded')
    // The end of an upgrade path (a hop the next took over is not), and the version before its first hop.
    .whereNull('u.next_hop_id')
    .whereRaw('COALESCE(u.origin_version, u.from_version) IS NOT NULL')
    .select(
      'u.device_id',
      db.raw('COALESCE(u.origin_version, u.from_version) AS from_version'),
      'd.firmware',
      'd.model_id',
    );
  return rows.map((r) => ({ deviceId: r.device_id, previousVersion: r.from_version, firmware: r.firmware }));
}
