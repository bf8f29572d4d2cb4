import type { Logger } from '../logger';
import { SingleFlightLoop } from '../shared/single-flight-loop';
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
  private readonly loop: SingleFlightLoop;

  constructor(private readonly options: RetentionWorkerOptions) {
    this.loop = new SingleFlightLoop({
      round: () => this.pass(),
      // The database may be down for a while; the next pass tries again.
      onError: (err) => options.logger.warn({ err }, 'retention pass failed; will retry at the next interval'),
      poll: { everyMs: options.intervalMs ?? 60 * 60_000, firstAfterMs: options.firstDelayMs ?? 5 * 60_000 },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** One pass now (tests, the operator tool); a pass already under way is awaited instead. */
  runNow(): Promise<void> {
    return this.loop.run();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async pass(): Promise<void> {
    const started = performance.now();
    const exclusive = this.options.exclusive ?? (async (pass: () => Promise<void>) => (await pass(), true));
    const ran = await exclusive(async () => {
      const result = await this.options.retention.pruneOnce(() => this.loop.stopping);
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
  }
}
