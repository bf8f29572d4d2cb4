import type { Db } from '../../db/db';
import type { DeploymentCounts, FailureCodeCount } from '../deployment-types';
import type { TransferSummary } from '../delta-transfer';

/** What a finished deployment's views show, as kept when it finished. */
export interface KeptOutcome {
  counts: DeploymentCounts;
  failures: FailureCodeCount[];
  transfer: TransferSummary;
}

/** Written once: in the transaction that finishes the deployment, or at its first view after. */
export async function keepOutcome(
  db: Db,
  input: { deploymentId: string; outcome: KeptOutcome; now: Date },
): Promise<void> {
  await db.raw(
    `INSERT INTO deployment_outcomes (deployment_id, counts, failures, transfer, recorded_at)
     VALUES (?, ?::jsonb, ?::jsonb, ?::jsonb, ?) ON CONFLICT (deployment_id) DO NOTHING`,
    [
      input.deploymentId,
      JSON.stringify(input.outcome.counts),
      JSON.stringify(input.outcome.failures),
      JSON.stringify(input.outcome.transfer),
      input.now,
    ],
  );
}

export async function keptOutcomes(db: Db, deploymentIds: string[]): Promise<Map<string, KeptOutcome>> {
  if (deploymentIds.length === 0) return new Map();
  const { rows } = await db.raw<{ rows: Array<KeptOutcome & { deployment_id: string }> }>(
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
