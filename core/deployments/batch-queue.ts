/**
 * Coalesces many small calls into one batch (a burst of 10,000 devices connecting, or their
 * progress reports): items wait at most `delayMs`, at most `maxBatch` go into one flush, one
 * flush runs at a time. Each `add` resolves when its batch was applied (or rejects with its error).
 */
export class BatchQueue<T> {
  private items: Array<{ item: T; resolve: () => void; reject: (e: unknown) => void }> = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;

  constructor(
    private readonly flush: (items: T[]) => Promise<void>,
    private readonly options: { delayMs: number; maxBatch: number },
  ) {}

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.items.push({ item, resolve, reject });
      if (this.items.length >= this.options.maxBatch) this.kick();
      else if (!this.timer) {
        this.timer = setTimeout(() => this.kick(), this.options.delayMs);
        this.timer.unref();
      }
    });
  }

  get size(): number {
    return this.items.length;
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running || this.items.length === 0) return;
    const batch = this.items.splice(0, this.options.maxBatch);
    this.running = this.flush(batch.map((b) => b.item))
      .then(
        () => batch.forEach((b) => b.resolve()),
        (err: unknown) => batch.forEach((b) => b.reject(err)),
      )
      .finally(() => {
        this.running = null;
        if (this.items.length > 0) this.kick();
      });
  }
}
