import type { Db } from '../../db/db';
import type { OtaErrorCode } from '#protocol/payloads';
import { emptyCounts, type DeploymentCounts, type FailureCodeCount, type UpdateState } from '../deployment-types';
import { noTransfer, type TransferSummary } from '../delta-transfer';

/** A deployment's figures (core/deployments/deployment-figures.ts): what its views show. */
export interface DeploymentFigures {
  counts: DeploymentCounts;
  failures: FailureCodeCount[];
  transfer: TransferSummary;
}

interface CountRow {
  deployment_id: string;
  state: UpdateState;
  superseded: boolean;
  health_failed: boolean;
  /** Left alone: no upgrade path (upgrade-paths.ts). */
  no_path: boolean;
  n: number;
  /** sum() of bigint is numeric: the driver gives strings; null when no update of the group went out. */
  sent: string | null;
  full: string | null;
  deltas: number;
}

/**
 * Counts per state (superseded and health-gate failures apart) and the bytes the commands sent
 * (docs/ota.md "Delta images": per update whose command went out, the delta its last command
 * offered, or the full image; an update that fell back from its delta counts both), for several
 * deployments in one pass over their updates. Counts leave out the hops of an upgrade path that
 * led to a next one; the bytes count every hop's command. Update rows carry no foreign key (migration
 * 20261123000000_lean_update_targets): one whose version row is gone still counts, with no bytes.
 */
export async function countsAndTransfer(
  db: Db,
  deploymentIds: string[],
): Promise<Map<string, Pick<DeploymentFigures, 'counts' | 'transfer'>>> {
  const map = new Map(deploymentIds.map((id) => [id, { counts: emptyCounts(), transfer: noTransfer() }]));
  if (deploymentIds.length === 0) return map;
  const result = await db.raw<{ rows: CountRow[] }>(
    `SELECT u.deployment_id, u.state, (u.superseded_by IS NOT NULL) AS superseded, (u.health_failed_at IS NOT NULL) AS health_failed,
            (u.state = 'cancelled' AND u.error IS NOT DISTINCT FROM 'no_upgrade_path') AS no_path,
            (count(*) FILTER (WHERE u.next_hop_id IS NULL))::int AS n,
            sum(CASE WHEN u.delta_refused THEN f.size + coalesce(fd.size, 0)
                     WHEN fd.size IS NOT NULL THEN fd.size ELSE f.size END) FILTER (WHERE u.sent_at IS NOT NULL AND f.id IS NOT NULL) AS sent,
            sum(f.size) FILTER (WHERE u.sent_at IS NOT NULL AND f.id IS NOT NULL) AS full,
            (count(fd.id) FILTER (WHERE u.sent_at IS NOT NULL AND f.id IS NOT NULL AND NOT u.delta_refused))::int AS deltas
       FROM device_updates u
       LEFT JOIN firmware_versions f ON f.id = u.firmware_version_id
       LEFT JOIN firmware_deltas fd ON fd.id = u.delta_id
      WHERE u.deployment_id = ANY(?::uuid[])
      GROUP BY 1, 2, 3, 4, 5`,
    [deploymentIds],
  );
  for (const r of result.rows) {
    const { counts: c, transfer: t } = map.get(r.deployment_id)!;
    if (r.superseded) c.superseded += r.n;
    else if (r.no_path) c.no_upgrade_path += r.n;
    else c[r.state] += r.n;
    if (r.health_failed) c.health_failed += r.n;
    t.bytesSent += Number(r.sent ?? 0);
    t.fullImageBytes += Number(r.full ?? 0);
    t.deltaUpdates += r.deltas;
  }
  return map;
}

/**
 * Failed and rolled-back updates per reported error code (null: the device gave none), most
 * frequent first, for several deployments in one query: what dashboards group failures by.
 */
export async function failureCodesFor(db: Db, deploymentIds: string[]): Promise<Map<string, FailureCodeCount[]>> {
  const map = new Map<string, FailureCodeCount[]>(deploymentIds.map((id) => [id, []]));
  if (deploymentIds.length === 0) return map;
  const result = await db.raw<{ rows: Array<{ deployment_id: string; code: OtaErrorCode | null; n: number }> }>(
    `SELECT deployment_id, error_code AS code, count(*)::int AS n
       FROM device_updates WHERE deployment_id = ANY(?::uuid[]) AND state IN ('failed', 'rolled_back')
      GROUP BY 1, 2 ORDER BY 3 DESC, 2 NULLS LAST`,
    [deploymentIds],
  );
  for (const r of result.rows) map.get(r.deployment_id)!.push({ code: r.code, count: r.n });
  return map;
}

/** Written once: in the transaction that finishes the deployment, or at its first view after. */
export async function keepFigures(
  db: Db,
  input: { deploymentId: string; figures: DeploymentFigures; now: Date },
): Promise<void> {
  await db.raw(
    `INSERT INTO deployment_outcomes (deployment_id, counts, failures, transfer, recorded_at)
     VALUES (?, ?::jsonb, ?::jsonb, ?::jsonb, ?) ON CONFLICT (deployment_id) DO NOTHING`,
    [
      input.deploymentId,
      JSON.stringify(input.figures.counts),
      JSON.stringify(input.figures.failures),
      JSON.stringify(input.figures.transfer),
      input.now,
    ],
  );
}

export async function keptFigures(db: Db, deploymentIds: string[]): Promise<Map<string, DeploymentFigures>> {
  if (deploymentIds.length === 0) return new Map();
  const { rows } = await db.raw<{ rows: Array<DeploymentFigures & { deployment_id: string }> }>(
    `SELECT deployment_id, counts, failures, transfer FROM deployment_outcomes WHERE deployment_id = ANY(?::uuid[])`,
    [deploymentIds],
  );
  return new Map(rows.map((r) => [r.deployment_id, { counts: r.counts, failures: r.failures, transfer: r.transfer }]));
}

/** Succeeded updates the health gate marked as failures, per deployment (the partial index device_updates_health_failed). */
export async function healthFailedCounts(db: Db, deploymentIds: string[]): Promise<Map<string, number>> {
  if (deploymentIds.length === 0) return new Map();
  const { rows } = await db.raw<{ rows: Array<{ deployment_id: string; n: number }> }>(
    `SELECT deployment_id, count(*)::int AS n FROM device_updates
      WHERE deployment_id = ANY(?::uuid[]) AND health_failed_at IS NOT NULL AND next_hop_id IS NULL
      GROUP BY 1`,
    [deploymentIds],
  );
  return new Map(rows.map((r) => [r.deployment_id, r.n]));
}
