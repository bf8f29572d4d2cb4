import type { Logger } from '../../logger';
import type { PruneResult, RetentionService } from './retention.service';

export interface RetentionWorkerOptions {
  retention: RetentionService;
  logger: Logger;
  /** Between passes (ms). Default one hour. */
  intervalMs?: number;
  /** Before the first pass (ms): not in the way of a start or a reconnect storm. Default 5 minutes. */
  firstDelayMs?: number;
  onPruned?: (result: PruneResult) => void;
  /**
   * Runs a pass unless another process of the cluster is running one (withAdvisoryLock); answers
   * whether it ran. Default: always runs.
   */
  exclusive?: (pass: () => Promise<void>) => Promise<boolean>;
}

/** Runs the retention pass in the background: shortly after start, then every interval. */
export class RetentionWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly options: RetentionWorkerOptions) {}

  start(): void {
    this.stopped = false;
    this.schedule(this.options.firstDelayMs ?? 5 * 60_000);
  }

  /** One pass now (tests, the operator tool); a pass already under way is awaited instead. */
  runNow(): Promise<void> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      void this.runNow().finally(() => {
        if (!this.stopped) this.schedule(this.options.intervalMs ?? 60 * 60_000);
      });
    }, delayMs);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    const started = performance.now();
    const exclusive = this.options.exclusive ?? (async (pass: () => Promise<void>) => (await pass(), true));
    try {
      const ran = await exclusive(async () => {
        const result = await this.options.retention.pruneOnce(() => this.stopped);
        this.options.onPruned?.(result);
        const total = Object.values(result).reduce((a, b) => a + b, 0);
        if (total > 0)
          this.options.logger.info(
            { ...result, ms: Math.round(performance.now() - started) },
            'retention: old rows deleted',
          );
      });
      // Every process schedules passes; in a cluster the first to come does the walk.
      if (!ran) this.options.logger.debug('retention: another process is running the pass; skipped');
    } catch (err) {
      // The database may be down for a while; the next pass tries again.
      this.options.logger.warn({ err }, 'retention pass failed; will retry at the next interval');
    }
  }
}
