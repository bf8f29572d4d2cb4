export interface SingleFlightLoopOptions {
  /** One round of the work. Rounds never overlap. */
  round: () => Promise<void>;
  /** What a round threw. The loop goes on: the next kick or poll tries again. */
  onError: (error: unknown) => void;
  /**
   * Once started, a round is asked for this often, the safety net for work nobody kicked (rows a
   * crash left, retries coming due, another process's leftovers). Absent: only kicks and run().
   */
  poll?: {
    /** Between polls (ms). */
    everyMs: number;
    /** Before the first poll (ms). Default `everyMs`. */
    firstAfterMs?: number;
  };
}

/**
 * A background job run in rounds, one at a time, on three kinds of request:
 *
 * - `kick()` says "something new may be there". A kick while a round is under way runs exactly
 *   one more round after it (several kicks merge into that one), since the round under way may
 *   already have looked.
 * - `run()` says "make sure a round happens". It joins the round under way, or starts one.
 * - a poll tick (`poll`) is a `run()`: a round already under way is doing what the tick asks, and
 *   a slow round is not followed by a second one straight away.
 *
 * `stop()` waits for the round under way and lets no further round start. A loop that is not
 * started runs rounds on request but does not poll.
 *
 * The classes that own a loop (the outbox dispatcher, the webhook and retention workers, the OTA
 * engine) pass it on under the same names: `start()`, `kick()`, `runNow()` (this `run()`),
 * `settle()` and `stop()`.
 */
export class SingleFlightLoop {
  private current: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SingleFlightLoopOptions) {}

  /** True once stop() was called: a long round checks it between pages to end early. */
  get stopping(): boolean {
    return this.stopped;
  }

  /** Starts polling (when `poll` is set); rounds may run again after a stop(). */
  start(): void {
    this.stopped = false;
    const poll = this.options.poll;
    if (poll) this.arm(poll.firstAfterMs ?? poll.everyMs, poll.everyMs);
  }

  /** Asks for a round soon: at once when idle, else exactly one more after the round under way. */
  kick(): void {
    if (this.stopped) return;
    if (this.current) {
      this.again = true;
      return;
    }
    void this.begin();
  }

  /** Resolves when the round under way, or one started now, is over (its error went to `onError`). */
  run(): Promise<void> {
    if (this.stopped) return this.current ?? Promise.resolve();
    return this.current ?? this.begin();
  }

  /** Kicks, then resolves once no round is under way: whatever was there at the call is handled. */
  async settle(): Promise<void> {
    this.kick();
    while (this.current) await this.current;
  }

  /** Stops polling and further rounds; resolves when the round under way is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.again = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.current) await this.current;
  }

  private begin(): Promise<void> {
    const round = this.options
      .round()
      .catch((error: unknown) => this.options.onError(error))
      .finally(() => {
        this.current = null;
        if (this.again && !this.stopped) {
          this.again = false;
          void this.begin();
        }
      });
    this.current = round;
    return round;
  }

  /** Re-armed at each tick, not after the round: polls keep their pace like setInterval's. */
  private arm(delayMs: number, everyMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.arm(everyMs, everyMs);
      void this.run();
    }, delayMs);
    this.timer.unref();
  }
}
