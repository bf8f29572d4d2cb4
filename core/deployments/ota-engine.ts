import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import type { DeviceGateway, OtaDeviceListener, OtaProgressReport } from '../devices/device-gateway';
import { isUuid } from '../shared/ids';
import { isValidVersion } from '../shared/version';
import type { DownloadLinkSigner } from '../firmware/download-links';
import { finishUpdates } from './update-transitions';
import { BatchQueue } from './batch-queue';
import { SingleFlightLoop } from '../shared/single-flight-loop';
import { applyHealthGate, applyProgressBatch, type ProgressItem } from './ota-reports';
import type { DeploymentChangeListener } from './deployment-inputs';
import { OtaCommandPublisher } from './ota-command-publisher';
import { retryingTransaction } from './retrying-transaction';
import { DEFAULT_OTA_OPTIONS, type OtaEngineOptions, type OtaMetrics } from './ota-engine-options';
import { dispatchDeployment, type DispatchOutcome } from './deployment-dispatch';
import { DeploymentEvaluations } from './deployment-evaluations';
import { matchHeartbeats } from './report-rules';
import { keepStillSent, staleSentCommands, unansweredCommands } from './resend';
import { dueDeploymentIds } from './store/deployments.store';
import { takeDeltaFallbacks } from './delta-fallback';
import type { DeltaOffer } from '../firmware/delta/delta-cache';

/** What the engine uses of the delta cache. */
export interface DeltaSource {
  offers(updateIds: string[]): Promise<Map<string, DeltaOffer>>;
  prepareDeployment(deploymentId: string): void;
}
import { applyUpdateLock } from './update-lock-messages';
import type { UpdateLock } from '#protocol/lock-payloads';
import { lockActiveUpdatesOfDevices, lockOverdueUpdates, queuedUpdatesOfDevices } from './store/device-updates.store';

export { DEFAULT_OTA_OPTIONS, type OtaEngineOptions, type OtaMetrics } from './ota-engine-options';

/**
 * The OTA delivery engine (docs/ota.md "Delivery engine"). Event-driven: it dispatches when a
 * device becomes ready (broker), when a deployment is created, resumed or opens a batch, and a
 * slow sweep catches deadlines, windows and scheduled starts. All truth is in PostgreSQL: rows
 * are claimed with FOR UPDATE SKIP LOCKED, so several processes can run the engine side by side;
 * its in-memory queues and dirty set (deployment-evaluations.ts) only coalesce work, they never
 * decide anything. Dispatching a deployment is deployment-dispatch.ts.
 */
export class OtaEngine implements OtaDeviceListener, DeploymentChangeListener {
  private readonly commands: OtaCommandPublisher;
  private readonly sweeps: SingleFlightLoop;
  private readonly evaluations: DeploymentEvaluations;
  private readonly pending = new Set<Promise<unknown>>();
  private stopped = false;
  /**
   * Running deployments the sweep leaves alone until then (epoch ms): their last dispatch of the
   * whole deployment left no queued update of a device that is online and said what it runs.
   * Their other queued updates wait for devices that are offline or have not said what they run,
   * and each of those dispatches its own update when it is heard (devicesReady, devicesHeard);
   * the sweep backs that up every quietResweepMs instead of every sweepIntervalMs, its
   * evaluation too (every change of an update marks its deployment for evaluation; the sweep's
   * is a backup as well). A running deployment to 100,000 offline devices cost PostgreSQL one
   * probe per queued row and a count of its rows every 5 s: 20 % of a core with nothing to send
   * (measured here).
   */
  private readonly quietUntil = new Map<string, number>();
  /**
   * Per deployment, its dispatches of the whole deployment under way: each learns whether
   * something left one of the deployment's updates waiting on an online device meanwhile (a
   * device's own dispatch may have seen a row the whole one passed before the device came
   * online), and then does not make it quiet.
   */
  private readonly wholeDispatches = new Map<string, Set<{ waited: boolean }>>();
  /** A connect storm or a burst of reports becomes a few batched transactions, not one each. */
  private readonly readyQueue = new BatchQueue<{ accountId: string; deviceId: string }>(
    (items) => this.devicesReady(items),
    { delayMs: 20, maxBatch: 1000 },
  );
  private readonly heardQueue = new BatchQueue<{
    accountId: string;
    deviceId: string;
    firmware: string;
    connection: string | undefined;
  }>((items) => this.devicesHeard(items), { delayMs: 20, maxBatch: 1000 });
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
      /** Delta images (firmware/delta/delta-cache.ts): built for each deployment, offered in its commands. */
      deltas?: DeltaSource;
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
      ...(area.deltas ? { deltas: (ids: string[]) => area.deltas!.offers(ids) } : {}),
    });
    const every = this.options.sweepIntervalMs;
    this.evaluations = new DeploymentEvaluations({
      deps: this.deps,
      dispatch: (deploymentId) => this.dispatch({ deploymentId }),
      track: (work) => void this.track(work),
      isStopped: () => this.stopped,
    });
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
    this.evaluations.cancelTimer();
    await this.sweeps.stop();
    await this.idle();
  }

  /** Resolves when the work started so far (dispatches, evaluations) finished: tests and shutdown. */
  async idle(): Promise<void> {
    while (this.pending.size > 0 || this.evaluations.pending) {
      if (this.evaluations.pending) this.evaluations.flushAtOnce();
      await Promise.allSettled([...this.pending]);
    }
  }

  // ---- DeploymentChangeListener

  deploymentChanged(deploymentId: string): void {
    this.area.deltas?.prepareDeployment(deploymentId);
    this.markDirty(deploymentId);
    void this.track(this.dispatch({ deploymentId }));
  }

  /** Unclaims deleted some of these deployments' updates: judge them again now (DeviceService). */
  updatesRemoved(deploymentIds: string[]): void {
    for (const id of deploymentIds) this.markDirty(id);
  }

  // ---- OtaDeviceListener (called by the broker)

  async onDeviceReady(input: { accountId: string; deviceId: string; serial: string }): Promise<void> {
    if (this.stopped) return;
    await this.track(this.readyQueue.add({ accountId: input.accountId, deviceId: input.deviceId }));
  }

  async onDeviceHeard(input: {
    accountId: string;
    deviceId: string;
    serial: string;
    firmware: string;
    connection?: string | undefined;
  }): Promise<void> {
    if (this.stopped) return;
    await this.track(
      this.heardQueue.add({
        accountId: input.accountId,
        deviceId: input.deviceId,
        firmware: input.firmware,
        connection: input.connection,
      }),
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
    // Recorded as `other`; counted so a module sending codes outside the vocabulary shows.
    if (input.report.unknownErrorCode) this.area.metrics?.unknownErrorCode?.();
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

  /**
   * A device's lock (update-lock-messages.ts): resolves once stored, rejects when it could not
   * be (the broker acknowledges the message only then). A release dispatches the device's
   * queued update now; a lock that ends by itself is caught by the sweep, like a window.
   */
  async onLock(input: { accountId: string; deviceId: string; serial: string; lock: UpdateLock }): Promise<void> {
    if (this.stopped) throw new Error('the OTA engine is stopping');
    const stored = applyUpdateLock(this.deps, {
      accountId: input.accountId,
      deviceId: input.deviceId,
      serial: input.serial,
      message: input.lock,
    });
    void this.track(stored.catch(() => undefined));
    const outcome = await stored;
    if (!outcome) return;
    this.area.metrics?.lock?.({
      reason: 'release' in input.lock ? 'release' : input.lock.reason,
      capped: outcome.capped,
    });
    for (const id of outcome.requeued) {
      // Taken back and held: waiting, with its device online.
      this.sawWaiting(id);
      this.markDirty(id);
    }
    if (outcome.until === null)
      void this.track(this.readyQueue.add({ accountId: input.accountId, deviceId: input.deviceId }));
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
  runNow(): Promise<void> {
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
    // Scheduled deployments whose time came, and every running one that is not quiet
    // (quietUntil): evaluate, then dispatch.
    const due = new Set(await dueDeploymentIds(knex, now));
    for (const id of this.quietUntil.keys()) if (!due.has(id)) this.quietUntil.delete(id);
    const awake = [...due].filter((id) => (this.quietUntil.get(id) ?? 0) <= now.getTime());
    for (const id of awake) this.markDirty(id);
    await this.evaluations.flushNow();
    for (const id of awake) await this.dispatch({ deploymentId: id });
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
    if (rows.length > 0)
      await this.commands.publish(
        await keepStillSent(this.deps, rows, { connectionOf: (r) => this.connectionOf(r.serial), unlessSentOn: false }),
      );
  }

  /** The serial's current connection to this process once subscribed to its commands, when the gateway says. */
  private connectionOf(serial: string): string | undefined {
    return this.area.gateway.readyConnectionOf?.(serial);
  }

  // ---- dispatch

  /**
   * See dispatchDeployment: the deployment's queued updates that may go now. A dispatch of the
   * whole deployment that leaves nothing waiting makes it quiet (quietUntil); one that leaves
   * something waiting, whatever devices it was for, ends that.
   */
  private async dispatch(input: { deploymentId: string; readyDeviceIds?: string[] }): Promise<DispatchOutcome> {
    const { deploymentId } = input;
    const whole = input.readyDeviceIds === undefined ? { waited: false } : undefined;
    const underWay = this.wholeDispatches.get(deploymentId) ?? new Set();
    if (whole) this.wholeDispatches.set(deploymentId, underWay.add(whole));
    let outcome: DispatchOutcome;
    try {
      outcome = await dispatchDeployment(
        {
          deps: this.deps,
          options: this.options,
          commands: this.commands,
          metrics: this.area.metrics,
          markDirty: (id) => this.markDirty(id),
          connectionOf: (serial) => this.connectionOf(serial),
        },
        input,
      );
    } finally {
      if (whole) {
        underWay.delete(whole);
        if (underWay.size === 0) this.wholeDispatches.delete(deploymentId);
      }
    }
    if (outcome.waiting > 0) this.sawWaiting(deploymentId);
    else if (!outcome.running) this.quietUntil.delete(deploymentId);
    else if (whole && !whole.waited)
      this.quietUntil.set(deploymentId, this.deps.clock.now().getTime() + this.options.quietResweepMs);
    return outcome;
  }

  /** One of the deployment's updates waits on an online device: the sweep looks at it every time. */
  private sawWaiting(deploymentId: string): void {
    this.quietUntil.delete(deploymentId);
    for (const dispatch of this.wholeDispatches.get(deploymentId) ?? []) dispatch.waited = true;
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
   * already shows: the heartbeat completes that update. Nor one already sent on the connection it
   * was heard on: the dispatch of a queued update when the device subscribed (or when its
   * heartbeat was stored) sent it a moment ago.
   */
  private async devicesHeard(
    items: Array<{ accountId: string; deviceId: string; firmware: string; connection: string | undefined }>,
  ): Promise<void> {
    const rows = await unansweredCommands(this.deps, items);
    if (rows.length === 0) return;
    const heardOn = new Map(items.map((i) => [i.deviceId, i.connection]));
    await this.commands.publish(
      await keepStillSent(this.deps, rows, { connectionOf: (r) => heardOn.get(r.deviceId), unlessSentOn: true }),
    );
  }

  private async healthGate(deviceIds: string[]): Promise<void> {
    for (const id of await applyHealthGate(this.deps, deviceIds)) this.markDirty(id);
  }

  private async progressBatch(all: ProgressItem[]): Promise<void> {
    // A first `delta_apply` failure is not one: the job goes again with the full image (delta-fallback.ts).
    const {
      rest: items,
      stale,
      resend,
    } = await takeDeltaFallbacks(this.deps, {
      items: all,
      stepTimeoutMs: this.options.stepTimeoutMs,
    });
    for (let i = 0; i < stale; i++) this.area.metrics?.ignored('stale_delta_report');
    if (resend.length > 0) void this.track(this.commands.publish(resend));
    const { ignored, finished } = await applyProgressBatch(this.deps, this.options, items);
    for (const reason of ignored) this.area.metrics?.ignored(reason);
    for (const r of finished) {
      this.area.metrics?.finished(r.final, 1);
      this.markDirty(r.deploymentId);
    }
    await this.dispatchNextHops(finished);
  }

  /** Upgrade paths: devices whose hop just succeeded get their next hop now (upgrade-paths.ts). */
  private async dispatchNextHops(
    finished: ReadonlyArray<{ deploymentId: string; deviceId: string; nextHopQueued?: boolean }>,
  ): Promise<void> {
    const next = new Map<string, string[]>();
    for (const r of finished)
      if (r.nextHopQueued) next.set(r.deploymentId, [...(next.get(r.deploymentId) ?? []), r.deviceId]);
    for (const [deploymentId, deviceIds] of next) await this.dispatch({ deploymentId, readyDeviceIds: deviceIds });
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
    await this.dispatchNextHops(finished);
    this.area.metrics?.finished('succeeded', finished.length);
    for (const r of finished) this.markDirty(r.deploymentId);
  }

  private markDirty(deploymentId: string): void {
    this.evaluations.markDirty(deploymentId);
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
