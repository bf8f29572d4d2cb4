import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { emptyCounts } from './deployment-types';
import { noTransfer } from './delta-transfer';
import {
  countsAndTransfer,
  failureCodesFor,
  healthFailedCounts,
  keepFigures,
  keptFigures,
  type DeploymentFigures,
} from './store/deployment-figures.store';

export type { DeploymentFigures } from './store/deployment-figures.store';

/**
 * A deployment's per-state counts, failures per error code and bytes sent. Counted over its
 * updates while it runs; once it finished (every update final) they are what it finished with,
 * kept then (keepFinishedFigures, or at its first view for one that finished before they were
 * kept), and only the health gate's later verdicts on its succeeded updates are counted live. So
 * an unclaimed device leaves a finished deployment's device list but not its figures (docs/ota.md
 * "Operator actions", reading).
 */
export async function figuresOf(
  deps: Pick<ServiceDeps, 'knex' | 'clock' | 'logger'>,
  deployments: ReadonlyArray<{ id: string; finishedAt: Date | null }>,
): Promise<Map<string, DeploymentFigures>> {
  const db = deps.knex;
  const deploymentIds = deployments.map((d) => d.id);
  const kept = await keptFigures(db, deploymentIds);
  const live = deploymentIds.filter((id) => !kept.has(id));
  const [counted, failures, healthFailed] = await Promise.all([
    countsAndTransfer(db, live),
    failureCodesFor(db, live),
    healthFailedCounts(db, [...kept.keys()]),
  ]);
  const figures = new Map<string, DeploymentFigures>();
  for (const id of deploymentIds) {
    const k = kept.get(id);
    figures.set(
      id,
      k
        ? {
            // In the documents' order (a JSON column keeps its own).
            counts: { ...emptyCounts(), ...k.counts, health_failed: healthFailed.get(id) ?? 0 },
            failures: k.failures.map((f) => ({ code: f.code, count: f.count })),
            transfer: { ...noTransfer(), ...k.transfer },
          }
        : { ...counted.get(id)!, failures: failures.get(id)! },
    );
  }
  // Finished before figures were kept: counted here, and kept. The view has its answer either
  // way: a write that fails (a database that refuses writes for a moment) leaves it to the next.
  const unkept = deployments.filter((d) => d.finishedAt !== null && !kept.has(d.id));
  for (const d of unkept)
    await keepFigures(db, { deploymentId: d.id, figures: figures.get(d.id)!, now: deps.clock.now() }).catch(
      (err: unknown) => deps.logger.warn({ err, deploymentId: d.id }, "keeping a finished deployment's figures failed"),
    );
  return figures;
}

/** In the transaction that finishes the deployment: its figures as they stand, kept. */
export async function keepFinishedFigures(trx: Knex.Transaction, deploymentId: string, now: Date): Promise<void> {
  // One after the other: a transaction runs one statement at a time.
  const counted = await countsAndTransfer(trx, [deploymentId]);
  const failures = await failureCodesFor(trx, [deploymentId]);
  await keepFigures(trx, {
    deploymentId,
    figures: { ...counted.get(deploymentId)!, failures: failures.get(deploymentId)! },
    now,
  });
}
