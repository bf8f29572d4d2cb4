/**
 * An async iterator fed by pushes: what a subscription resolver returns. Bounded: when a slow
 * consumer falls `max` items behind, the oldest are dropped (counted) instead of growing
 * memory without limit; every live view re-reads state, so the newest item is what matters.
 */
export class PushQueue<T> implements AsyncIterableIterator<T> {
  private readonly items: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void) | undefined;
  private failure: ((error: Error) => void) | undefined;
  private ended = false;
  private error: Error | undefined;
  dropped = 0;

  constructor(private readonly options: { max?: number; onEnd?: () => void; onDrop?: () => void } = {}) {}

  push(item: T): void {
    if (this.ended) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = undefined;
      this.failure = undefined;
      resolve({ value: item, done: false });
      return;
    }
    this.items.push(item);
    if (this.items.length > (this.options.max ?? 1000)) {
      this.items.shift();
      this.dropped += 1;
      this.options.onDrop?.();
    }
  }

  /** Ends the stream with an error (the subscriber sees it, then completion). */
  fail(error: Error): void {
    if (this.ended) return;
    if (this.failure) {
      const reject = this.failure;
      this.cleanup();
      reject(error);
      return;
    }
    this.error = error;
  }

  end(): void {
    if (this.ended) return;
    const resolve = this.waiting;
    this.cleanup();
    resolve?.({ value: undefined, done: true });
  }

  private cleanup(): void {
    this.ended = true;
    this.waiting = undefined;
    this.failure = undefined;
    this.items.length = 0;
    this.options.onEnd?.();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.items.length > 0) return Promise.resolve({ value: this.items.shift()!, done: false });
    if (this.error !== undefined) {
      const error = this.error;
      this.error = undefined;
      this.cleanup();
      return Promise.reject(error);
    }
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.failure = reject;
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  /** The consumer gave up with `error` (AsyncIterator protocol): the stream ends and the call rejects with it. */
  throw(error?: Error): Promise<IteratorResult<T>> {
    this.end();
    return Promise.reject(error ?? new Error('the subscription was ended'));
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
