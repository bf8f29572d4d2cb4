import type { ServiceDeps } from '../service-deps';
import type { OtaEngineOptions, OtaMetrics } from './ota-engine-options';
import type { OtaCommandPublisher } from './ota-command-publisher';
import { finishUpdates, markSent } from './update-transitions';
import { mayGetCommandNow, selectForDispatch, type Candidate } from './dispatch-rules';
import { readDeployment, takeDispatchTurn } from './store/deployments.store';
import { inFlightPerTag, lockDispatchPage } from './store/dispatch.store';

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

/**
 * Sends the deployment's queued updates that may go now: device online (or the one device that
 * just became ready), batch opened, inside its window when asked, under the tag limit. Pages by
 * job id so skipped rows are not read twice.
 */
export async function dispatchDeployment(
  engine: DispatchEngine,
  input: { deploymentId: string; readyDeviceIds?: string[] },
): Promise<number> {
  const { deps, options, commands, metrics, markDirty } = engine;
  const { clock } = deps;
  let after = '00000000-0000-0000-0000-000000000000';
  let sentTotal = 0;
  const { dispatchFirstPage, dispatchMaxPage } = options;
  // The largest page bounds every page, the first included.
  let pageSize = Math.min(dispatchFirstPage, dispatchMaxPage);
  const publishing: Array<Promise<void>> = [];
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
        if (!page) return { sent: [] as Candidate[], more: false, last: after };
        const candidates = page.candidates.filter((c) => mayGetCommandNow(c, input.readyDeviceIds !== undefined));
        const next = { more: page.more, last: page.last };
        if (candidates.length === 0) return { sent: [] as Candidate[], ...next };
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
          send.map((c) => ({ ...c, connection: engine.connectionOf?.(c.serial) ?? null })),
          new Date(now.getTime() + options.stepTimeoutMs),
        );
        metrics?.finished('succeeded', done.length);
        if (done.length) markDirty(dep.id);
        return { sent: send, ...next };
      });
      if (!result) return sentTotal;
      // Published after the commit: a crash in between leaves `sent` rows that the re-send covers.
      publishing.push(commands.publish(result.sent));
      sentTotal += result.sent.length;
      if (!result.more) return sentTotal;
      after = result.last;
      pageSize = Math.min(dispatchMaxPage, pageSize * 2);
    }
  } finally {
    await Promise.all(publishing);
  }
}
