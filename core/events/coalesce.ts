/**
 * Runs `work` at most once per `intervalMs` however often `trigger()` is called: the first
 * trigger runs soon (after `leadMs`, so a burst of events lands in one run), later ones are
 * merged into one trailing run. Runs never overlap. Used so 10,000 heartbeating devices give a
 * browser a few fleet summaries per second, not thousands.
 */
export class Coalescer {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private pending = false;
  private lastRun = 0;
  private closed = false;

  constructor(
    private readonly work: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly onError: (error: unknown) => void,
    private readonly leadMs = 20,
  ) {}

  trigger(): void {
    if (this.closed) return;
    this.pending = true;
    if (this.timer || this.running) return;
    const wait = Math.max(this.leadMs, this.lastRun + this.intervalMs - Date.now());
    this.timer = setTimeout(() => void this.run(), wait);
    this.timer.unref();
  }

  private async run(): Promise<void> {
    this.timer = undefined;
    if (this.closed || !this.takePending()) return;
    this.running = true;
    this.lastRun = Date.now();
    try {
      await this.work();
    } catch (error) {
      this.onError(error);
    } finally {
      this.running = false;
      // Triggered while the work ran: one trailing run.
      if (this.pending) this.trigger();
    }
  }

  /** Whether a run was asked for; the request is taken. */
  private takePending(): boolean {
    const pending = this.pending;
    this.pending = false;
    return pending;
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
