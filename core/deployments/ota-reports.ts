import type { ServiceDeps } from '../service-deps';
import { DEFAULT_ROLLOUT } from './deployment-types';
import { foldReports, type ProgressItem, type ReportTiming } from './report-rules';
import { applySteps, finishUpdates, type UpdateRef } from './update-transitions';
import { lockReportedUpdates } from './store/device-updates.store';
import { countReconnects } from './store/update-health.store';
import { retryOnLockConflict } from './retrying-transaction';

export type { ProgressItem, ReportTiming } from './report-rules';

/**
 * Rollout health gate: a reconnect soon after a device's last successful update counts against
 * it (store/update-health.store.ts countReconnects); over the deployment's limit the update is
 * unhealthy (a failure). Returns the deployments whose updates it failed.
 */
export async function applyHealthGate(deps: ServiceDeps, deviceIds: string[]): Promise<string[]> {
  // One statement, but it locks the updates it counts in the planner's order, and a device that
  // reconnects re-sends its last report, whose batch locks the same rows (a deadlock is retried).
  const counted = await retryOnLockConflict(deps, () =>
    countReconnects(deps.plannedOnce ?? deps.knex, {
      deviceIds,
      now: deps.clock.now(),
      defaultWindowMinutes: DEFAULT_ROLLOUT.health_window_minutes,
      defaultMaxReconnects: DEFAULT_ROLLOUT.health_max_reconnects,
    }),
  );
  return [...new Set(counted.filter((r) => r.healthFailedAt !== null).map((r) => r.deploymentId))];
}

/** Progress reports, in arrival order, applied to the state machine (report-rules.ts) in one transaction. */
export async function applyProgressBatch(
  deps: ServiceDeps,
  options: ReportTiming,
  items: ProgressItem[],
): Promise<{ ignored: string[]; finished: Array<UpdateRef & { final: string }> }> {
  const { clock } = deps;
  let ignored: string[] = [];
  const finished = await deps.transaction(async (trx) => {
    const updates = await lockReportedUpdates(trx, [...new Set(items.map((i) => i.report.jobId))]);
    // A retried transaction decides again from scratch.
    const folded = foldReports(updates, items, { now: clock.now(), timing: options });
    ignored = folded.ignored;
    await applySteps(trx, clock, folded.steps);
    const done: Array<UpdateRef & { final: string }> = [];
    for (const g of folded.finals) {
      for (const r of await finishUpdates(trx, clock, {
        ids: g.ids,
        state: g.state,
        error: g.error,
        errorCode: g.errorCode,
      }))
        done.push({ ...r, final: g.state });
    }
    return done;
  });
  return { ignored, finished };
}
