import type { ServiceDeps } from '../service-deps';
import type { OtaEngineOptions, OtaMetrics } from './ota-engine-options';
import type { OtaCommandPublisher } from './ota-command-publisher';
import { finishUpdates, markSent } from './update-transitions';
import { needsReplan, replanQueued } from './upgrade-paths';
import { mayGetCommandNow, selectForDispatch, type Candidate } from './dispatch-rules';
import { readDeployment, takeDispatchTurn } from './store/deployments.store';
import { DISPATCH_START, inFlightPerTag, lockDispatchPage, type DispatchCursor } from './store/dispatch.store';

/** What a dispatch uses of the OTA engine. */
export interface DispatchEngine {
  /** Its `transaction` retries a lock cycle with the heartbeat flush. */
  deps: ServiceDeps;
  options: Pick<OtaEngineOptions, 'dispatchFirstPage' | 'dispatchMaxPage' | 'stepTimeoutMs'>;
  commands: Pick<OtaCommandPublisher, 'publish'>;
  metrics: OtaMetrics | undefined;
  /** A deployment some of whose updates finished here (already installed) wants evaluating. */
  markDirty: (deploymentId: string) => void;
  /** The serial's subscribed connection to this process (DeviceGateway.readyConnectionOf), recorded with each command. */
  connectionOf?: (serial: string) => string | undefined;
}

/** What one dispatch of a deployment left behind. */
export interface DispatchOutcome {
  /**
   * Queued updates left queued although their device is online and said what it runs (held,
   * outside their window, over the tag limit, without a binary): time alone may let them go.
   */
  waiting: number;
  /** The deployment was running (a dispatch of another one reads nothing). */
  running: boolean;
}

/**
 * Sends the deployment's queued updates that may go now: device online (or the one device that
 * just became ready), batch opened, inside its window when asked, under the tag limit. Pages in
 * (batch, job id) order so skipped rows are not read twice.
 */
export async function dispatchDeployment(
  engine: DispatchEngine,
  input: { deploymentId: string; readyDeviceIds?: string[]; again?: boolean },
): Promise<DispatchOutcome> {
  const { deps, options, commands, metrics, markDirty } = engine;
  const { clock } = deps;
  let after: DispatchCursor = DISPATCH_START;
  let waiting = 0;
  let running = false;
  const { dispatchFirstPage, dispatchMaxPage } = options;
  // The largest page bounds every page, the first included.
  let pageSize = Math.min(dispatchFirstPage, dispatchMaxPage);
  const publishing: Array<Promise<void>> = [];
  // Devices whose queued row changed here (re-planned, or next hop of a path queued): dispatched once more.
  const again = new Set<string>();
  try {
    for (;;) {
      const result = await deps.transaction(async (trx) => {
        const dep = await readDeployment(trx, input.deploymentId);
        if (!dep || dep.status !== 'running') return null;
        const tagLimit = dep.rollout?.max_concurrent_per_tag;
        // A tag limit is a decision over several rows: take turns per deployment across processes.
        if (tagLimit) await takeDispatchTurn(trx, dep.id);
        const page = await lockDispatchPage(trx, {
          deploymentId: dep.id,
          batch: dep.currentBatch,
          after,
          limit: pageSize,
          withConfig: dep.respectMaintenanceWindow,
          withTags: Boolean(tagLimit),
          ...(input.readyDeviceIds ? { readyDeviceIds: input.readyDeviceIds } : {}),
        });
        if (!page) return { sent: [] as Candidate[], waiting: 0, more: false, last: after };
        const ready = page.candidates.filter((c) => mayGetCommandNow(c, input.readyDeviceIds !== undefined));
        const next = { more: page.more, last: page.last };
        // Upgrade paths: a target that does not allow what the device runs now is re-planned, not sent.
        // Spread only for rows with a path: copying every candidate cost microseconds a row.
        const stale = ready.filter(
          (c) => c.path !== undefined && c.path.upgradeFrom !== null && needsReplan({ ...c, ...c.path }),
        );
        if (stale.length > 0) {
          await replanQueued(
            trx,
            clock,
            stale.map((c) => ({ ...c, ...c.path! })),
          );
          for (const c of stale) again.add(c.deviceId);
        }
        const candidates = stale.length > 0 ? ready.filter((c) => !stale.includes(c)) : ready;
        if (candidates.length === 0) return { sent: [] as Candidate[], waiting: 0, ...next };
        const now = clock.now();
        const { already, noFile, send } = selectForDispatch(candidates, {
          now,
          respectMaintenanceWindow: dep.respectMaintenanceWindow,
          ...(tagLimit
            ? { tagLimit, inFlightPerTag: await inFlightPerTag(trx, { deploymentId: dep.id, tag: tagLimit.tag }) }
            : {}),
        });
        const done = await finishUpdates(trx, clock, {
          ids: already.map((c) => c.id),
          state: 'succeeded',
          detail: { already_installed: true },
        });
        // A row without a binary waits rather than failing, and logs why.
        if (noFile.length)
          deps.logger.warn(
            { deploymentId: dep.id, jobs: noFile.length },
            'queued updates wait: their firmware has no binary',
          );
        await markSent(
          trx,
          clock,
          send.map((c) => ({
            id: c.id,
            accountId: c.accountId,
            deviceId: c.deviceId,
            deploymentId: c.deploymentId,
            serial: c.serial,
            targetVersion: c.targetVersion,
            fromVersion: c.fromVersion,
            connection: engine.connectionOf?.(c.serial) ?? null,
          })),
          new Date(now.getTime() + options.stepTimeoutMs),
        );
        const gone = new Set([...send, ...already]);
        // Each candidate passed mayGetCommandNow (a device that just became ready may not show
        // online in its row yet): those not sent nor finished wait.
        const waitingHere = candidates.filter((c) => !gone.has(c)).length;
        for (const r of done) if (r.nextHopQueued) again.add(r.deviceId);
        metrics?.finished('succeeded', done.length);
        if (done.length) markDirty(dep.id);
        return { sent: send, waiting: waitingHere, ...next };
      });
      if (!result) break;
      running = true;
      // Published after the commit: a crash in between leaves `sent` rows that the re-send covers.
      publishing.push(commands.publish(result.sent));
      waiting += result.waiting;
      if (!result.more) break;
      after = result.last;
      pageSize = Math.min(dispatchMaxPage, pageSize * 2);
    }
  } finally {
    await Promise.all(publishing);
  }
  // Once: what the second round re-plans waits for the next event (no loop).
  if (again.size > 0 && !input.again) {
    const second = await dispatchDeployment(engine, {
      deploymentId: input.deploymentId,
      readyDeviceIds: [...again],
      again: true,
    });
    waiting += second.waiting;
  }
  return { waiting, running };
}
