import type { ServiceDeps } from '../service-deps';
import { evaluateDeployment } from './deployment-progress';

/** Longest wait before a dirty deployment is evaluated, however costly the last evaluation was. */
const EVALUATION_MAX_DELAY_MS = 2000;

export interface DeploymentEvaluationsInput {
  /** Its `transaction` retries a lock cycle (the OTA engine's). */
  deps: ServiceDeps;
  /** Sends what a deployment that just started or opened a batch may send now. */
  dispatch: (deploymentId: string) => Promise<unknown>;
  /** Keeps a round of evaluations for the engine's idle() and stop(). */
  track: (work: Promise<void>) => void;
  /** The engine is stopping: no new round is timed. */
  isStopped: () => boolean;
}

/**
 * The OTA engine's deployment evaluations, coalesced: a deployment whose updates changed is
 * marked dirty, and a round soon after evaluates each dirty one once (progress, batches, the
 * failure threshold, completion). The set only coalesces work; the evaluation decides from rows.
 */
export class DeploymentEvaluations {
  private readonly dirty = new Set<string>();
  private flushTimer: NodeJS.Timeout | undefined;
  /** The costliest evaluation of the last round (ms): spaces the next round. */
  private evaluationCostMs = 0;

  constructor(private readonly input: DeploymentEvaluationsInput) {}

  /** Some deployment waits for its evaluation. */
  get pending(): boolean {
    return this.dirty.size > 0;
  }

  markDirty(deploymentId: string): void {
    this.dirty.add(deploymentId);
    if (!this.flushTimer && !this.input.isStopped()) {
      // Coalesces a burst of finished updates into one evaluation per deployment. An evaluation
      // counts every row of the deployment (tens of ms at 100,000 targets): evaluations are spaced
      // by four times the last one's cost, so they take at most a fifth of the time while a large
      // rollout finishes thousands of updates a second; small deployments keep the 50 ms.
      const delay = Math.min(EVALUATION_MAX_DELAY_MS, Math.max(50, 4 * this.evaluationCostMs));
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.flush();
      }, delay);
      this.flushTimer.unref();
    }
  }

  /** Starts the round now rather than when its timer fires (idle(), stop()). */
  flushAtOnce(): void {
    this.cancelTimer();
    this.flush();
  }

  /** No round is timed any more; deployments marked dirty stay so (the engine is stopping). */
  cancelTimer(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
  }

  /** Evaluates every dirty deployment now; resolves when done (the sweep awaits it). */
  async flushNow(): Promise<void> {
    const { deps } = this.input;
    const ids = [...this.dirty];
    this.dirty.clear();
    let cost = 0;
    for (const id of ids) {
      try {
        const started = performance.now();
        const outcome = await deps.transaction((trx) => evaluateDeployment(trx, deps.clock, id));
        cost = Math.max(cost, performance.now() - started);
        if (outcome === 'batch_opened' || outcome === 'started') {
          await this.input.dispatch(id);
          this.markDirty(id);
        }
      } catch (err) {
        deps.logger.error({ err, deploymentId: id }, 'deployment evaluation failed');
      }
    }
    this.evaluationCostMs = cost;
  }

  private flush(): void {
    this.input.track(this.flushNow());
  }
}
