import type { Logger } from '../logger';

/**
 * Watches whether the database answers, so requests fail fast with 503 + Retry-After while it
 * is down (instead of each waiting for a pool timeout), and notices recovery without a restart.
 * A probe runs every `intervalMs`; `failuresToDown` probes in a row that error or take longer
 * than `timeoutMs` mark the database down (one slow probe on a busy machine is not an outage);
 * the first good probe marks it up again.
 */
export class DatabaseHealth {
  private up = true;
  private timer: NodeJS.Timeout | undefined;
  private probing = false;
  private consecutiveFailures = 0;
  private readonly listeners = new Set<(up: boolean) => void>();

  constructor(
    /** One probe: resolves when the database answers (Database.probe). */
    private readonly answers: () => Promise<void>,
    private readonly logger: Logger,
    private readonly options: { intervalMs?: number; timeoutMs?: number; failuresToDown?: number } = {},
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.probe(), this.options.intervalMs ?? 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  isUp(): boolean {
    return this.up;
  }

  onChange(listener: (up: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A request saw a connection-level failure: probe now rather than at the next tick. */
  reportFailure(): void {
    void this.probe();
  }

  async probe(): Promise<boolean> {
    if (this.probing) return this.up;
    this.probing = true;
    let ok: boolean;
    try {
      await Promise.race([
        this.answers(),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('probe timed out')), this.options.timeoutMs ?? 2000).unref(),
        ),
      ]);
      ok = true;
    } catch {
      ok = false;
    } finally {
      this.probing = false;
    }
    this.consecutiveFailures = ok ? 0 : this.consecutiveFailures + 1;
    if (!ok && this.consecutiveFailures < (this.options.failuresToDown ?? 2)) return this.up;
    if (ok !== this.up) {
      this.up = ok;
      if (ok) this.logger.info('database reachable again');
      else this.logger.error('database unreachable: answering 503 until it is back');
      for (const listener of this.listeners) listener(ok);
    }
    return ok;
  }
}
