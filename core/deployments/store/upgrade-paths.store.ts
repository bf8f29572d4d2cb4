import type { Knex } from 'knex';

/**
 * The rows of upgrade paths (docs/ota.md "Upgrade paths"): one `device_updates` row per hop, in
 * the deployment. Columns: migrations/20261127123000_upgrade_paths.ts. Every write keeps its
 * device history row, as the other update writes do.
 */

/** A hop to write: the firmware record it installs. */
export interface HopTarget {
  id: string;
  version: string;
}

/** Queued rows of a deployment not planned yet, grouped by what they go from and to. */
export async function unplannedSourcesOf(
  trx: Knex.Transaction,
  deploymentId: string,
): Promise<Array<{ fromVersion: string | null; firmwareVersionId: string; targetVersion: string; n: number }>> {
  const rows = (
    await trx.raw<{
      rows: Array<{ from_version: string | null; firmware_version_id: string; target_version: string; n: number }>;
    }>(
      `SELECT from_version, firmware_version_id, target_version, count(*)::int AS n FROM device_updates
        WHERE deployment_id = ? AND state = 'queued' AND hop IS NULL GROUP BY 1, 2, 3`,
      [deploymentId],
    )
  ).rows;
  return rows.map((r) => ({
    fromVersion: r.from_version,
    firmwareVersionId: r.firmware_version_id,
    targetVersion: r.target_version,
    n: r.n,
  }));
}

const HISTORY = `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
  SELECT account_id, device_id, 'update_step', jsonb_build_object('job_id', id, 'deployment_id', deployment_id, 'target_version', target_version) || ?::jsonb, ?
    FROM changed`;

/**
 * The queued, unplanned rows going from `fromVersion` to `final` start the path `hops` (the last
 * is `final`): they now install the first hop.
 */
export async function startPathOfQueued(
  trx: Knex.Transaction,
  input: { deploymentId: string; fromVersion: string; final: HopTarget; hops: HopTarget[]; now: Date },
): Promise<number> {
  const first = input.hops[0]!;
  const result = await trx.raw<{ rowCount: number }>(
    `WITH changed AS (
       UPDATE device_updates SET firmware_version_id = ?, target_version = ?, final_firmware_version_id = ?, final_version = ?,
              hop = 1, hop_count = ?
        WHERE deployment_id = ? AND state = 'queued' AND hop IS NULL AND from_version = ? AND firmware_version_id = ?
       RETURNING id, account_id, device_id, deployment_id, target_version)
     ${HISTORY}`,
    [
      first.id,
      first.version,
      input.final.id,
      input.final.version,
      input.hops.length,
      input.deploymentId,
      input.fromVersion,
      input.final.id,
      JSON.stringify({ state: 'queued', path: input.hops.map((h) => h.version), hop: 1 }),
      input.now,
    ],
  );
  return result.rowCount;
}

/** Queued rows whose device has no path to their target: `cancelled` with error `no_upgrade_path`, left alone. */
export async function markNoUpgradePath(
  trx: Knex.Transaction,
  input: { deploymentId: string; fromVersion: string; firmwareVersionId: string; now: Date },
): Promise<number> {
  const result = await trx.raw<{ rowCount: number }>(
    `WITH changed AS (
       UPDATE device_updates SET state = 'cancelled', error = 'no_upgrade_path', finished_at = ?, state_changed_at = ?, deadline_at = NULL
        WHERE deployment_id = ? AND state = 'queued' AND hop IS NULL AND from_version = ? AND firmware_version_id = ?
       RETURNING id, account_id, device_id, deployment_id, target_version)
     ${HISTORY}`,
    [
      input.now,
      input.now,
      input.deploymentId,
      input.fromVersion,
      input.firmwareVersionId,
      JSON.stringify({ state: 'cancelled', reason: 'no_upgrade_path', from_version: input.fromVersion }),
      input.now,
    ],
  );
  return result.rowCount;
}

/** A hop that just succeeded while its path goes on. */
export interface PassedHop {
  id: string;
  accountId: string;
  deviceId: string;
  deploymentId: string;
  batch: number;
  /** The version the device reached. */
  targetVersion: string;
  final: HopTarget;
  hop: number;
  /** The version before the path's first hop. */
  originVersion: string | null;
  /** The deployment was cancelled meanwhile: the path stops here. */
  deploymentCancelled: boolean;
}

/** Of these succeeded rows, the hops that are not the last of their path. */
export async function passedHopsAmong(trx: Knex.Transaction, ids: string[]): Promise<PassedHop[]> {
  if (ids.length === 0) return [];
  const rows = (
    await trx.raw<{
      rows: Array<{
        id: string;
        account_id: string;
        device_id: string;
        deployment_id: string;
        batch: number;
        target_version: string;
        final_version: string;
        final_firmware_version_id: string;
        hop: number;
        origin_version: string | null;
        cancelled: boolean;
      }>;
    }>(
      `SELECT u.id, u.account_id, u.device_id, u.deployment_id, u.batch, u.target_version, u.final_version, u.final_firmware_version_id, u.hop,
              COALESCE(u.origin_version, u.from_version) AS origin_version, p.status = 'cancelled' AS cancelled
         FROM device_updates u JOIN deployments p ON p.id = u.deployment_id
        WHERE u.id = ANY(?::uuid[]) AND u.state = 'succeeded' AND u.final_firmware_version_id IS NOT NULL
          AND u.firmware_version_id <> u.final_firmware_version_id AND u.next_hop_id IS NULL`,
      [ids],
    )
  ).rows;
  return rows.map((r) => ({
    id: r.id,
    accountId: r.account_id,
    deviceId: r.device_id,
    deploymentId: r.deployment_id,
    batch: r.batch,
    targetVersion: r.target_version,
    final: { id: r.final_firmware_version_id, version: r.final_version },
    hop: r.hop,
    originVersion: r.origin_version,
    deploymentCancelled: r.cancelled,
  }));
}

/**
 * The next hop of a path after `passed`: a new row (its own job id) of the same deployment and
 * batch, queued to `next`, or `cancelled` with `cancelReason` (`no_upgrade_path`, or `deployment
 * cancelled`); `passed` points to it.
 */
export async function insertNextHop(
  trx: Knex.Transaction,
  input: {
    id: string;
    passed: PassedHop;
    next: HopTarget;
    hopCount: number;
    cancelReason: 'no_upgrade_path' | 'deployment cancelled' | null;
    now: Date;
  },
): Promise<void> {
  const { passed, now } = input;
  const cancelled = input.cancelReason !== null;
  await trx.raw(
    `WITH changed AS (
       INSERT INTO device_updates (id, account_id, deployment_id, device_id, firmware_version_id, from_version, target_version, state, batch,
              final_firmware_version_id, final_version, hop, hop_count, origin_version, error, finished_at, state_changed_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       RETURNING id, account_id, device_id, deployment_id, target_version)
     ${HISTORY}`,
    [
      input.id,
      passed.accountId,
      passed.deploymentId,
      passed.deviceId,
      input.next.id,
      passed.targetVersion,
      input.next.version,
      cancelled ? 'cancelled' : 'queued',
      passed.batch,
      passed.final.id,
      passed.final.version,
      passed.hop + 1,
      input.hopCount,
      passed.originVersion,
      input.cancelReason,
      cancelled ? now : null,
      now,
      now,
      JSON.stringify({
        state: cancelled ? 'cancelled' : 'queued',
        from_version: passed.targetVersion,
        hop: passed.hop + 1,
        ...(cancelled ? { reason: input.cancelReason } : {}),
      }),
      now,
    ],
  );
  await trx.raw('UPDATE device_updates SET next_hop_id = ? WHERE id = ?', [input.id, passed.id]);
}

/**
 * Re-plans one queued row (never sent) from the version its device runs now: it installs
 * `target` as hop `hop` of `hopCount` towards `final` (null final: an ordinary one-hop update),
 * or, with `noPath`, is cancelled as `no_upgrade_path`.
 */
export async function replanQueuedRow(
  trx: Knex.Transaction,
  input: {
    id: string;
    fromVersion: string;
    target: HopTarget;
    final: HopTarget | null;
    hop: number | null;
    hopCount: number | null;
    noPath: boolean;
    now: Date;
  },
): Promise<void> {
  const { now } = input;
  await trx.raw(
    `WITH changed AS (
       UPDATE device_updates SET firmware_version_id = ?, target_version = ?, final_firmware_version_id = ?, final_version = ?,
              hop = ?, hop_count = ?, from_version = ?,
              state = CASE WHEN ? THEN 'cancelled' ELSE state END, error = CASE WHEN ? THEN 'no_upgrade_path' ELSE error END,
              finished_at = CASE WHEN ? THEN ?::timestamptz ELSE finished_at END
        WHERE id = ? AND state = 'queued'
       RETURNING id, account_id, device_id, deployment_id, target_version)
     ${HISTORY}`,
    [
      input.target.id,
      input.target.version,
      input.final?.id ?? null,
      input.final?.version ?? null,
      input.hop,
      input.hopCount,
      input.fromVersion,
      input.noPath,
      input.noPath,
      input.noPath,
      now,
      input.id,
      JSON.stringify({
        state: input.noPath ? 'cancelled' : 'queued',
        replanned_from: input.fromVersion,
        ...(input.noPath ? { reason: 'no_upgrade_path' } : { hop: input.hop }),
      }),
      now,
    ],
  );
}
