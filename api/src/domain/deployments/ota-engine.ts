import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import type { DeviceGateway, OtaDeviceListener, OtaProgressReport } from '../devices/device-gateway';
import { isUuid } from '../shared/ids';
import { isValidVersion } from '../shared/version';
import type { DownloadLinkSigner } from '../firmware/download-links';
import { evaluateDeployment } from './deployment-progress';
import { finishUpdates, markSent } from './update-transitions';
import { BatchQueue } from './batch-queue';
import { SingleFlightLoop } from '../shared/single-flight-loop';
import { applyHealthGate, applyProgressBatch, type ProgressItem } from './ota-reports';
import type { DeploymentChangeListener } from './deployment-inputs';
import { OtaCommandPublisher } from './ota-command-publisher';
import { retryingTransaction } from './retrying-transaction';
import { mayGetCommandNow, selectForDispatch, type Candidate } from './dispatch-rules';
import { matchHeartbeats } from './report-rules';
import { keepStillSent, staleSentCommands, unansweredCommands } from './resend';
import { dueDeploymentIds, readDeployment, takeDispatchTurn } from './store/deployments.store';
import { inFlightPerTag, lockDispatchPage } from './store/dispatch.store';
import { lockActiveUpdatesOfDevices, lockOverdueUpdates, queuedUpdatesOfDevices } from './store/device-updates.store';

/** Engine timing; every value configurable (config.ts OTA_* variables, tests pass small ones). */
export interface OtaEngineOptions {
  /** A non-final step without news for this long ends `timed_out`. Default 15 min. */
  stepTimeoutMs: number;
  /** After the device said `succeeded`, how long it has to come back on the target version. Default 10 min. */
  bootTimeoutMs: number;
  /** A `sent` command without any answer is published again (same job id) after this long. Default 60 s. */
  resendAfterMs: number;
  /** Lifetime of a download link. Default 6 h. */
  linkTtlMs: number;
  /** Safety sweep (deadlines, windows, scheduled starts, re-sends). Default 5 s; 0 disables the timer. */
  sweepIntervalMs: number;
  /**
   * Commands in a deployment's first dispatch transaction; each next one doubles up to
   * `dispatchMaxPage`. Small first, so the first commands leave about 0.5 s after the deploy
   * request; growing, so a large campaign is still a few transactions. One page of 10,000 held
   * 10,000 device rows locked for over a second (heartbeat flushes waited behind it) and sent
   * the first command 1.7-2.1 s after the request, every command no sooner (bench/ota.bench.ts).
   * Default 1000.
   */
  dispatchFirstPage: number;
  /** Most commands in one dispatch transaction. Default 10,000. */
  dispatchMaxPage: number;
}

export const DEFAULT_OTA_OPTIONS: OtaEngineOptions = {
  stepTimeoutMs: 15 * 60_000,
  bootTimeoutMs: 10 * 60_000,
  resendAfterMs: 60_000,
  linkTtlMs: 6 * 3600_000,
  sweepIntervalMs: 5000,
  dispatchFirstPage: 1000,
  dispatchMaxPage: 10_000,
};

export interface OtaMetrics {
  published(n: number): void;
  ignored(reason: string): void;
  finished(state: string, n: number): void;
}

/** Longest wait before a dirty deployment is evaluated, however costly the last evaluation was. */
const EVALUATION_MAX_DELAY_MS = 2000;

/**
 * The OTA delivery engine (issue 4 item 2). Event-driven: it dispatches when a device becomes
 * ready (broker), when a deployment is created, resumed or opens a batch, and a slow sweep
 * catches deadlines, windows and scheduled starts. All truth is in PostgreSQL: rows are claimed
 * with FOR UPDATE SKIP LOCKED, so several processes can run the engine side by side; the
 * in-memory sets below only coalesce work, they never decide anything.
 */
export class OtaEngine implements OtaDeviceListener, DeploymentChangeListener {
  private readonly commands: OtaCommandPublisher;
  private readonly sweeps: SingleFlightLoop;
  private readonly dirty = new Set<string>();
  private flushTimer: NodeJS.Timeout | undefined;
  /** The costliest evaluation of the last round (ms): spaces the next round. */
  private evaluationCostMs = 0;
  private readonly pending = new Set<Promise<unknown>>();
  private stopped = false;
  /** A connect storm or a burst of reports becomes a few batched transactions, not one each. */
  private readonly readyQueue = new BatchQueue<{ accountId: string; deviceId: string }>(
    (items) => this.devicesReady(items),
    { delayMs: 20, maxBatch: 1000 },
  );
  private readonly heardQueue = new BatchQueue<{ accountId: string; deviceId: string; firmware: string }>(
    (items) => this.devicesHeard(items),
    { delayMs: 20, maxBatch: 1000 },
  );
  private readonly progressQueue = new BatchQueue<ProgressItem>((items) => this.progressBatch(items), {
    delayMs: 10,
    maxBatch: 1000,
  });

  private readonly deps: ServiceDeps;

  constructor(
    deps: ServiceDeps,
    private readonly area: {
      gateway: DeviceGateway;
      links: DownloadLinkSigner;
      metrics?: OtaMetrics;
      options?: Partial<OtaEngineOptions>;
      /** Firmware binaries loaded before their commands go out (FirmwareStorage.warm). */
      warmFirmware?: (storageKey: string, size: number) => Promise<void>;
      /** This process's `devices.broker_node`: the sweep re-sends only to devices connected here. */
      nodeId?: string;
    },
  ) {
    // The engine's transactions touch devices rows that the heartbeat flush updates in batches
    // too; PostgreSQL breaks a lock cycle by aborting one side (40P01), so the unit is retried.
    this.deps = { ...deps, transaction: retryingTransaction(deps) };
    this.commands = new OtaCommandPublisher({
      gateway: area.gateway,
      links: area.links,
      logger: deps.logger,
      now: () => deps.clock.now(),
      linkTtlMs: () => this.options.linkTtlMs,
      onPublished: () => this.area.metrics?.published(1),
      ...(area.warmFirmware ? { warm: area.warmFirmware } : {}),
    });
    const every = this.options.sweepIntervalMs;
    this.sweeps = new SingleFlightLoop({
      round: () => this.sweepOnce(),
      onError: (err) => deps.logger.error({ err }, 'OTA sweep failed'),
      ...(every > 0 ? { poll: { everyMs: every } } : {}),
    });
  }

  get options(): OtaEngineOptions {
    return { ...DEFAULT_OTA_OPTIONS, ...this.area.options };
  }

  /** PUBLIC_URL (or the bound HTTP address) once the server listens: the base of download links. */
  setBaseUrl(url: string): void {
    this.commands.setBaseUrl(url);
  }

  start(): void {
    this.stopped = false;
    this.sweeps.start();
    void this.track(this.sweeps.run());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    await this.sweeps.stop();
    await this.idle();
  }

  /** Resolves when the work started so far (dispatches, evaluations) finished: tests and shutdown. */
  async idle(): Promise<void> {
    while (this.pending.size > 0 || this.dirty.size > 0) {
      if (this.dirty.size > 0) {
        if (this.flushTimer) clearTimeout(this.flushTimer);
        this.flushTimer = undefined;
        this.flushDirty();
      }
      await Promise.allSettled([...this.pending]);
    }
  }

  // ---- DeploymentChangeListener

  deploymentChanged(deploymentId: string): void {
    this.markDirty(deploymentId);
    this.track(this.dispatch({ deploymentId }));
  }

  // ---- OtaDeviceListener (called by the broker)

  async onDeviceReady(input: { accountId: string; deviceId: string; serial: string }): Promise<void> {
    if (this.stopped) return;
    await this.track(this.readyQueue.add({ accountId: input.accountId, deviceId: input.deviceId }));
  }

  async onDeviceHeard(input: { accountId: string; deviceId: string; serial: string; firmware: string }): Promise<void> {
    if (this.stopped) return;
    await this.track(
      this.heardQueue.add({ accountId: input.accountId, deviceId: input.deviceId, firmware: input.firmware }),
    );
  }

  /**
   * Resolves once the report is stored (or judged: unknown and late jobs are ignored), rejects
   * when it could not be: the broker acknowledges the device's message only then.
   */
  async onProgress(input: {
    accountId: string;
    deviceId: string;
    serial: string;
    report: OtaProgressReport;
  }): Promise<void> {
    if (this.stopped) throw new Error('the OTA engine is stopping');
    if (!isUuid(input.report.jobId)) {
      this.area.metrics?.ignored('unknown_job');
      return;
    }
    const stored = this.progressQueue.add({
      accountId: input.accountId,
      deviceId: input.deviceId,
      report: input.report,
    });
    // Tracked for idle() and stop(); a failure is the caller's to report (the broker logs it and
    // closes the connection), not logged here a second time.
    void this.track(stored.catch(() => undefined));
    await stored;
  }

  async onFirmwareReported(
    reports: Array<{ accountId: string; deviceId: string; serial: string; firmware: string; previous: string | null }>,
  ): Promise<void> {
    if (this.stopped || reports.length === 0) return;
    await this.track(this.firmwareReported(reports));
  }

  // ---- sweep

  /**
   * Deadlines, scheduled starts, re-sends, windows, then every running deployment evaluated. Joins
   * the sweep under way rather than starting a second; a failure is logged, not thrown.
   */
  sweep(): Promise<void> {
    return this.sweeps.run();
  }

  private async sweepOnce(): Promise<void> {
    const { knex, clock } = this.deps;
    const now = clock.now();
    // Deadlines: one statement claims the overdue rows (SKIP LOCKED: another process may be on them).
    for (;;) {
      const finished = await this.deps.transaction(async (trx) => {
        const overdue = await lockOverdueUpdates(trx, { now, limit: 1000 });
        const rows = await finishUpdates(trx, clock, {
          ids: overdue,
          state: 'timed_out',
          error: 'no progress before the deadline',
        });
        return { rows, more: overdue.length === 1000 };
      });
      this.area.metrics?.finished('timed_out', finished.rows.length);
      for (const r of finished.rows) this.markDirty(r.deploymentId);
      if (!finished.more) break;
    }
    // Scheduled deployments whose time came, and every running one: evaluate, then dispatch.
    const due = await dueDeploymentIds(knex, now);
    for (const id of due) this.markDirty(id);
    await this.flushDirtyNow();
    for (const id of due) await this.dispatch({ deploymentId: id });
    await this.resendStale();
  }

  /**
   * `sent` commands nobody answered (lost publish, crash between commit and publish): same job
   * again, to devices on this process that it has heard from since they connected. A device that
   * just came back may have finished the job while away, its report on its way; one held by a
   * dead process would find the command in its session after the reboot that finished it. Both
   * get it from onDeviceHeard when it is still due.
   */
  private async resendStale(): Promise<void> {
    const rows = (await staleSentCommands(this.deps, this.options.resendAfterMs, this.area.nodeId)).filter((r) =>
      this.area.gateway.heardSinceConnect(r.serial),
    );
    if (rows.length > 0) await this.commands.publish(await keepStillSent(this.deps, rows));
  }

  // ---- dispatch

  /**
   * Sends the deployment's queued updates that may go now: device online (or the one device that
   * just became ready), batch opened, inside its window when asked, under the tag limit. Pages by
   * job id so skipped rows are not read twice.
   */
  private async dispatch(input: { deploymentId: string; readyDeviceIds?: string[] }): Promise<number> {
    const { clock } = this.deps;
    let after = '00000000-0000-0000-0000-000000000000';
    let sentTotal = 0;
    const { dispatchFirstPage, dispatchMaxPage } = this.options;
    // The largest page bounds every page, the first included.
    let pageSize = Math.min(dispatchFirstPage, dispatchMaxPage);
    const publishing: Array<Promise<void>> = [];
    try {
      for (;;) {
        const result = await this.deps.transaction(async (trx) => {
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
            this.deps.logger.warn(
              { deploymentId: dep.id, jobs: noFile.length },
              'queued updates wait: their firmware has no binary',
            );
          await markSent(trx, clock, send, new Date(now.getTime() + this.options.stepTimeoutMs));
          this.area.metrics?.finished('succeeded', done.length);
          if (done.length) this.markDirty(dep.id);
          return { sent: send, ...next };
        });
        if (!result) return sentTotal;
        // Published after the commit: a crash in between leaves `sent` rows that the re-send covers.
        publishing.push(this.commands.publish(result.sent));
        sentTotal += result.sent.length;
        if (!result.more) return sentTotal;
        after = result.last;
        pageSize = Math.min(dispatchMaxPage, pageSize * 2);
      }
    } finally {
      await Promise.all(publishing);
    }
  }

  // ---- device events

  /** Devices that connected and subscribed: dispatch their queued updates, health gate. */
  private async devicesReady(items: Array<{ accountId: string; deviceId: string }>): Promise<void> {
    const { knex } = this.deps;
    const ids = [...new Set(items.map((i) => i.deviceId))];
    const accountOf = new Map(items.map((i) => [i.deviceId, i.accountId]));
    const queued = (await queuedUpdatesOfDevices(knex, ids)).filter((r) => accountOf.get(r.deviceId) === r.accountId);
    const queuedByDeployment = new Map<string, string[]>();
    for (const r of queued)
      queuedByDeployment.set(r.deploymentId, [...(queuedByDeployment.get(r.deploymentId) ?? []), r.deviceId]);
    for (const [deploymentId, deviceIds] of queuedByDeployment)
      await this.dispatch({ deploymentId, readyDeviceIds: deviceIds });
    await this.healthGate(ids);
  }

  /**
   * Devices heard since they (re)connected, their earlier reports stored: a `sent` command still
   * unanswered is published again (same job id; its first publish may have raced the
   * subscription, or been lost with a process). Not one whose target the device's heartbeat
   * already shows: the heartbeat completes that update.
   */
  private async devicesHeard(items: Array<{ accountId: string; deviceId: string; firmware: string }>): Promise<void> {
    const rows = await unansweredCommands(this.deps, items);
    if (rows.length > 0) await this.commands.publish(await keepStillSent(this.deps, rows));
  }

  private async healthGate(deviceIds: string[]): Promise<void> {
    for (const id of await applyHealthGate(this.deps, deviceIds)) this.markDirty(id);
  }

  private async progressBatch(items: ProgressItem[]): Promise<void> {
    const { ignored, finished } = await applyProgressBatch(this.deps, this.options, items);
    for (const reason of ignored) this.area.metrics?.ignored(reason);
    for (const r of finished) {
      this.area.metrics?.finished(r.final, 1);
      this.markDirty(r.deploymentId);
    }
  }

  /**
   * Heartbeats: a device on its update's target version completes it (boot confirmation, or a
   * lost `succeeded`); a queued update whose target it already runs (installed over USB) completes
   * as already installed instead of being sent.
   */
  private async firmwareReported(
    reports: Array<{ accountId: string; deviceId: string; firmware: string }>,
  ): Promise<void> {
    const valid = reports.filter((r) => isValidVersion(r.firmware));
    if (valid.length === 0) return;
    let waiting = new Map<string, string[]>();
    const finished = await this.deps.transaction(async (trx: Knex.Transaction) => {
      const updates = await lockActiveUpdatesOfDevices(trx, [...new Set(valid.map((r) => r.deviceId))]);
      // A retried transaction decides again.
      const matched = matchHeartbeats(updates, valid);
      waiting = matched.waiting;
      return [
        ...(await finishUpdates(trx, this.deps.clock, {
          ids: matched.confirm,
          state: 'succeeded',
          detail: { confirmed_by: 'heartbeat' },
        })),
        ...(await finishUpdates(trx, this.deps.clock, {
          ids: matched.already,
          state: 'succeeded',
          detail: { already_installed: true },
        })),
      ];
    });
    // Queued updates of devices that just said what they run (first heartbeat): send them now.
    for (const [deploymentId, deviceIds] of waiting) await this.dispatch({ deploymentId, readyDeviceIds: deviceIds });
    this.area.metrics?.finished('succeeded', finished.length);
    for (const r of finished) this.markDirty(r.deploymentId);
  }

  // ---- deployment evaluation (coalesced)

  private markDirty(deploymentId: string): void {
    this.dirty.add(deploymentId);
    if (!this.flushTimer && !this.stopped) {
      // Coalesces a burst of finished updates into one evaluation per deployment. An evaluation
      // counts every row of the deployment (tens of ms at 100,000 targets): evaluations are spaced
      // by four times the last one's cost, so they take at most a fifth of the time while a large
      // rollout finishes thousands of updates a second; small deployments keep the 50 ms.
      const delay = Math.min(EVALUATION_MAX_DELAY_MS, Math.max(50, 4 * this.evaluationCostMs));
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.flushDirty();
      }, delay);
      this.flushTimer.unref();
    }
  }

  private flushDirty(): void {
    this.track(this.flushDirtyNow());
  }

  private async flushDirtyNow(): Promise<void> {
    const ids = [...this.dirty];
    this.dirty.clear();
    let cost = 0;
    for (const id of ids) {
      try {
        const started = performance.now();
        const outcome = await this.deps.transaction((trx) => evaluateDeployment(trx, this.deps.clock, id));
        cost = Math.max(cost, performance.now() - started);
        if (outcome === 'batch_opened' || outcome === 'started') {
          await this.dispatch({ deploymentId: id });
          this.markDirty(id);
        }
      } catch (err) {
        this.deps.logger.error({ err, deploymentId: id }, 'deployment evaluation failed');
      }
    }
    this.evaluationCostMs = cost;
  }

  private track<T>(work: Promise<T>): Promise<T> {
    const p = work.catch((err: unknown) => {
      this.deps.logger.error({ err }, 'OTA engine work failed');
      return undefined as T;
    });
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
    return p;
  }
}
