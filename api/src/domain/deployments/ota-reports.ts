import type { ServiceDeps } from '../service-deps';
import type { OtaProgressReport } from '../devices/device-gateway';
import { versionKey } from '../shared/version';
import { decideReport, DEFAULT_ROLLOUT, type UpdateState } from './deployment-types';
import { applySteps, finishUpdates, type StepWrite, type UpdateRef } from './update-transitions';

/** Timing the report handling needs (the engine's options). */
export interface ReportTiming {
  stepTimeoutMs: number;
  bootTimeoutMs: number;
}
type OtaEngineOptions = ReportTiming;

export interface ProgressItem {
  accountId: string;
  deviceId: string;
  report: OtaProgressReport;
}

/**
 * Rollout health gate: each reconnect within the window after a device's last successful
 * update is counted; more than the deployment's limit marks that update unhealthy (a failure).
 * Only the last update that ran on the device is judged: once a newer one was sent, the reboots
 * it causes are its own business, not a relapse of the one before. One statement for the batch.
 */
export async function applyHealthGate(deps: ServiceDeps, deviceIds: string[]): Promise<string[]> {
  const now = deps.clock.now();
  const flagged = await deps.transaction(async (trx) => {
    const rows = (await trx.raw(
      `WITH last AS (
         SELECT DISTINCT ON (u.device_id) u.id, u.device_id, u.account_id, u.deployment_id, u.finished_at,
                COALESCE((p.rollout ->> 'health_window_minutes')::float8, ?) AS window_minutes,
                COALESCE((p.rollout ->> 'health_max_reconnects')::int, ?) AS max_reconnects
           FROM device_updates u JOIN deployments p ON p.id = u.deployment_id
          WHERE u.device_id = ANY(?::uuid[]) AND u.state = 'succeeded' AND u.finished_at IS NOT NULL AND u.health_failed_at IS NULL
            AND NOT EXISTS (SELECT 1 FROM device_updates y WHERE y.device_id = u.device_id AND y.id <> u.id AND y.sent_at >= u.finished_at)
          ORDER BY u.device_id, u.finished_at DESC)
       UPDATE device_updates u
          SET reconnects_after = u.reconnects_after + 1,
              health_failed_at = CASE WHEN u.reconnects_after + 1 > last.max_reconnects THEN ?::timestamptz ELSE NULL END
         FROM last
        WHERE u.id = last.id AND last.finished_at > ?::timestamptz - make_interval(secs => last.window_minutes * 60)
        RETURNING u.id, u.device_id, u.account_id, u.deployment_id, u.reconnects_after, u.health_failed_at, last.window_minutes`,
      [DEFAULT_ROLLOUT.health_window_minutes, DEFAULT_ROLLOUT.health_max_reconnects, deviceIds, now, now],
    )).rows as Array<{ id: string; device_id: string; account_id: string; deployment_id: string; reconnects_after: number; health_failed_at: Date | null; window_minutes: number }>;
    const failed = rows.filter((r) => r.health_failed_at !== null);
    if (failed.length > 0) {
      await trx('device_events').insert(
        failed.map((r) => ({
          account_id: r.account_id,
          device_id: r.device_id,
          type: 'update_step',
          data: JSON.stringify({ job_id: r.id, deployment_id: r.deployment_id, state: 'succeeded', health: 'failed', reconnects: r.reconnects_after, window_minutes: r.window_minutes }),
          occurred_at: now,
        })),
      );
    }
    return failed.map((r) => r.deployment_id);
  });
  return [...new Set(flagged)];
}


/** Progress reports, in arrival order, applied to the state machine in one transaction. */
export async function applyProgressBatch(
deps: ServiceDeps,
options: OtaEngineOptions,
items: ProgressItem[],
): Promise<{ ignored: string[]; finished: Array<UpdateRef & { final: string }> }> {
  const { clock } = deps;
  const ignored: string[] = [];
  const finished = await deps.transaction(async (trx) => {
    ignored.length = 0; // a retried transaction decides again from scratch
    const rows = (await trx.raw(
      `SELECT u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version, u.state,
              CASE WHEN d.firmware IS NULL THEN NULL ELSE d.firmware_key END AS firmware_key
         FROM device_updates u JOIN devices d ON d.id = u.device_id
        WHERE u.id = ANY(?::uuid[]) ORDER BY u.id FOR UPDATE OF u`,
      [[...new Set(items.map((i) => i.report.jobId))]],
    )).rows as Array<UpdateRef & { state: UpdateState; firmware_key: string | null }>;
    const byId = new Map(rows.map((r) => [r.id, { row: r, state: r.state }]));
    const now = clock.now();
    const steps = new Map<string, StepWrite>();
    const finals = new Map<string, { state: 'succeeded' | 'failed' | 'rolled_back'; error: string | null }>();
    for (const { accountId, deviceId, report } of items) {
      const entry = byId.get(report.jobId);
      // A job of another device (or account) is as unknown as a made-up one.
      if (!entry || entry.row.device_id !== deviceId || entry.row.account_id !== accountId) {
        ignored.push('unknown_job');
        continue;
      }
      const decision = decideReport(entry.state, report.state);
      switch (decision.kind) {
        case 'ignore':
          ignored.push(decision.reason);
          break;
        case 'step':
        case 'reported_success': {
          const confirmed = decision.kind === 'reported_success' && entry.row.firmware_key !== null && entry.row.firmware_key === versionKey(entry.row.target_version);
          if (confirmed) {
            finals.set(entry.row.id, { state: 'succeeded', error: null });
            steps.delete(entry.row.id);
            entry.state = 'succeeded';
            break;
          }
          const state = decision.kind === 'step' ? decision.state : 'rebooting';
          const write = steps.get(entry.row.id) ?? { row: entry.row, state, progress: null, transitions: [], reportedSuccess: false, deadline: now };
          if (state !== entry.state || decision.kind === 'reported_success') write.transitions.push(state);
          write.state = state;
          write.progress = decision.kind === 'reported_success' ? 100 : (report.progress ?? write.progress);
          write.reportedSuccess ||= decision.kind === 'reported_success';
          // Boot-confirmed success: after `succeeded` the device has the boot timeout to come back on the version.
          write.deadline = new Date(now.getTime() + (write.reportedSuccess ? options.bootTimeoutMs : options.stepTimeoutMs));
          steps.set(entry.row.id, write);
          entry.state = state;
          break;
        }
        case 'final':
          finals.set(entry.row.id, { state: decision.state, error: report.error ?? (decision.state === 'failed' ? 'failed' : 'rolled back by the device') });
          steps.delete(entry.row.id);
          entry.state = decision.state;
          break;
        default:
          return decision satisfies never;
      }
    }
    await applySteps(trx, clock, [...steps.values()]);
    const done: Array<UpdateRef & { final: string }> = [];
    // Grouped by outcome and message: one statement per distinct (state, error).
    const groups = new Map<string, { state: 'succeeded' | 'failed' | 'rolled_back'; error: string | null; ids: string[] }>();
    for (const [id, f] of finals) {
      const key = `${f.state}\u0000${f.error ?? ''}`;
      const g = groups.get(key) ?? { ...f, ids: [] };
      g.ids.push(id);
      groups.set(key, g);
    }
    for (const g of groups.values()) {
      for (const r of await finishUpdates(trx, clock, { ids: g.ids, state: g.state, error: g.error })) done.push({ ...r, final: g.state });
    }
    return done;
  });
  return { ignored, finished };
}
