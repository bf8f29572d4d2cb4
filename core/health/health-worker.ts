import type { Logger } from '../logger';
import { SingleFlightLoop } from '../shared/single-flight-loop';
import type { HealthService } from './health.service';
import type { WarrantyService } from './warranty';

export interface HealthWorkerOptions {
  health: HealthService;
  /** The rollout gate's fixture signals (core/deployments/fixture-gate.service.ts). */
  gate: { evaluateAll(): Promise<string[]> };
  warranty: WarrantyService;
  logger: Logger;
  /** Between passes (ms). Default 5 minutes: roll-ups move by the hour, a rollout's batches by hours. */
  intervalMs?: number;
  /** Runs a pass unless another process of the cluster runs one; answers whether it ran. */
  exclusive?: (pass: () => Promise<void>) => Promise<boolean>;
  /** Deployments the gate paused (the OTA engine's progress views refresh). */
  onPaused?: (deploymentIds: string[]) => void;
}

/** Health states, the gate's fixture signals and warranty expiry, in one background pass. */
export class HealthWorker {
  private readonly loop: SingleFlightLoop;

  constructor(private readonly options: HealthWorkerOptions) {
    this.loop = new SingleFlightLoop({
      round: () => this.pass(),
      onError: (err) => options.logger.warn({ err }, 'fixture health pass failed; will retry at the next interval'),
      poll: { everyMs: options.intervalMs ?? 5 * 60_000 },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** One pass now (tests, the demo); a pass under way is awaited instead. */
  runNow(): Promise<void> {
    return this.loop.run();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async pass(): Promise<void> {
    const exclusive = this.options.exclusive ?? (async (pass: () => Promise<void>) => (await pass(), true));
    await exclusive(async () => {
      const changed = await this.options.health.evaluateAll();
      const paused = await this.options.gate.evaluateAll();
      const expired = await this.options.warranty.pruneExpired();
      if (paused.length > 0) {
        this.options.logger.warn({ deployments: paused }, 'fixture health gate paused deployments');
        this.options.onPaused?.(paused);
      }
      if (changed > 0 || expired > 0) this.options.logger.info({ changed, expired }, 'fixture health pass');
    });
  }
}
