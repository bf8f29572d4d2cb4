import { isUuid } from '../shared/ids';
import type { ServiceDeps } from '../service-deps';
import type { ProgressItem } from './report-rules';
import type { CommandJob } from './ota-command-publisher';
import { fallBackToFullImage, fellBackAlready } from './store/delta-fallback.store';
import { sentCommandsOfDevices } from './store/dispatch.store';

/**
 * A device reports `failed` with error_code `delta_apply` when it cannot apply the delta its
 * command offered (docs/device-protocol.md "Delta images"). The first such report of an update
 * is not a failure: the update stays in flight and the same job goes again with the full image
 * only (`delta_refused`). Later ones, and reports of updates this does not apply to, go through
 * the ordinary report rules (report-rules.ts), where `failed` is final: one fallback, no loop.
 * A `delta_apply` report of an update that fell back already is stale (the device repeating its
 * last report after a reconnect, or answering a redelivered command): its command now has no
 * delta, so it is dropped, and the update runs on to its outcome or its deadline.
 * Returns the reports left for the ordinary rules, the stale ones, and the commands to send now.
 */
export async function takeDeltaFallbacks(
  deps: ServiceDeps,
  input: { items: ProgressItem[]; stepTimeoutMs: number },
): Promise<{ rest: ProgressItem[]; stale: number; resend: CommandJob[] }> {
  const candidates = input.items.filter(
    (i) => i.report.state === 'failed' && i.report.errorCode === 'delta_apply' && isUuid(i.report.jobId),
  );
  if (candidates.length === 0) return { rest: input.items, stale: 0, resend: [] };
  const now = deps.clock.now();
  const { taken, stale } = await deps.transaction(async (trx) => {
    const ids = await fallBackToFullImage(trx, {
      reports: candidates.map((c) => ({ id: c.report.jobId, deviceId: c.deviceId, accountId: c.accountId })),
      now,
      deadline: new Date(now.getTime() + input.stepTimeoutMs),
    });
    const others = candidates.map((c) => c.report.jobId).filter((id) => !ids.includes(id));
    return { taken: new Set(ids), stale: new Set(await fellBackAlready(trx, others)) };
  });
  // Each taken update drops every report of its job from this batch: they came before the re-send.
  const dropped = (i: ProgressItem) =>
    taken.has(i.report.jobId) ||
    (stale.has(i.report.jobId) && i.report.errorCode === 'delta_apply' && i.report.state === 'failed');
  const rest = input.items.filter((i) => !dropped(i));
  const staleCount = input.items.filter((i) => stale.has(i.report.jobId) && dropped(i)).length;
  if (taken.size === 0) return { rest, stale: staleCount, resend: [] };
  const devices = [...new Set(candidates.filter((c) => taken.has(c.report.jobId)).map((c) => c.deviceId))];
  const resend = (await sentCommandsOfDevices(deps.knex, devices)).filter((r) => taken.has(r.id));
  return { rest, stale: staleCount, resend };
}
