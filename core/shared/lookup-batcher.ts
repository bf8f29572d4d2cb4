import type { Logger } from '../logger';

/**
 * How long a batch waits for more lookups (ms). A device connecting waits this long for its
 * credentials and again for its configuration, which it does not notice; the service pays a
 * round trip per batch. Devices that connect and subscribe (bench/connection-capacity.bench.ts,
 * 8,000 devices, PostgreSQL, same hour): with 2 ms, 578-622 µs per connection in the ramp
 * (1.80-2.31x bare Aedes); with 5 ms, 480-534 µs (1.75-1.83x); with 10 ms, 450 µs (1.84x).
 */
export const LOOKUP_WINDOW_MS = 5;

/**
 * Coalesces single-key lookups arriving within a short window into one `key = ANY(...)` query
 * per chunk of keys. In a reconnect storm connections arrive one per tick, so waiting a moment
 * turns hundreds of single-row reads into one; a lone caller barely notices. Nothing is cached:
 * every lookup is answered by a query that started after it was asked.
 */
export class LookupBatcher<V> {
  private pending = new Map<string, Array<(row: V | null | Error) => void>>();
  private scheduled = false;

  constructor(
    private readonly options: {
      /** Rows found for the keys; `keyOf` tells which key a row answers. */
      fetch: (keys: string[]) => Promise<V[]>;
      keyOf: (row: V) => string;
      logger: Logger;
      /** Logged when a fetch fails. */
      what: string;
      windowMs?: number;
      chunkSize?: number;
    },
  ) {}

  lookup(key: string): Promise<V | null> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(key);
      const waiter = (r: V | null | Error) => (r instanceof Error ? reject(r) : resolve(r));
      if (waiters) waiters.push(waiter);
      else this.pending.set(key, [waiter]);
      if (!this.scheduled) {
        this.scheduled = true;
        setTimeout(() => void this.runBatch(), this.options.windowMs ?? LOOKUP_WINDOW_MS);
      }
    });
  }

  private async runBatch(): Promise<void> {
    this.scheduled = false;
    const batch = this.pending;
    this.pending = new Map();
    const keys = [...batch.keys()];
    const chunkSize = this.options.chunkSize ?? 1000;
    for (let i = 0; i < keys.length; i += chunkSize) {
      const chunk = keys.slice(i, i + chunkSize);
      try {
        const rows = await this.options.fetch(chunk);
        const byKey = new Map(rows.map((r) => [this.options.keyOf(r), r]));
        for (const key of chunk) for (const w of batch.get(key)!) w(byKey.get(key) ?? null);
      } catch (error) {
        this.options.logger.error({ err: error }, `${this.options.what} failed`);
        for (const key of chunk) for (const w of batch.get(key)!) w(error as Error);
      }
    }
  }
}
