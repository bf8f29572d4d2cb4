/**
 * Recent `total` and `quota` answers of the device list, per account and filter. Automation and
 * dashboards ask for the same first page again and again; counting tens of thousands of matches
 * on each request would cost PostgreSQL milliseconds every time (bench/devices-list.bench.ts).
 * An entry lives `ttlMs` (default 1000 ms) and is dropped at once when this process claims,
 * unclaims or changes a device of the account. Changes made by another process (cluster) or by
 * heartbeats show up in `total` within `ttlMs`; the devices on the page are always read fresh.
 *
 * Requests that find no entry while a count of theirs is under way wait for that count instead
 * of starting their own: when an entry expired under 16 clients walking a list, each of them
 * counted 47,000 matches at once: the count led PostgreSQL's profile of the walk (bench/RESULTS.md).
 */
export class DeviceCountCache {
  private readonly entries = new Map<string, { total: number; quota: number; expires: number }>();
  private readonly loading = new Map<string, Promise<{ total: number; quota: number }>>();
  private readonly generations = new Map<string, number>();

  constructor(private readonly options: { ttlMs?: number; maxEntries?: number; now?: () => number } = {}) {}

  private key(accountId: string, filterKey: string): string {
    return `${accountId}\u0000${this.generations.get(accountId) ?? 0}\u0000${filterKey}`;
  }

  /** The cached answer, or the one `count` gives (one count at a time per account and filter). */
  async load(
    accountId: string,
    filterKey: string,
    count: () => Promise<{ total: number; quota: number }>,
  ): Promise<{ total: number; quota: number }> {
    const key = this.key(accountId, filterKey);
    const entry = this.entries.get(key);
    if (entry && entry.expires > this.now()) return entry;
    if (entry) this.entries.delete(key);
    const running = this.loading.get(key);
    if (running) return running;
    const counted = count().then(
      (value) => {
        this.loading.delete(key);
        this.set(key, value);
        return value;
      },
      (error: unknown) => {
        this.loading.delete(key);
        throw error;
      },
    );
    this.loading.set(key, counted);
    return counted;
  }

  private set(key: string, value: { total: number; quota: number }): void {
    if (this.entries.size >= (this.options.maxEntries ?? 10_000)) this.entries.clear();
    this.entries.set(key, { ...value, expires: this.now() + (this.options.ttlMs ?? 1000) });
  }

  /**
   * Every cached count of the account is stale now (its old generation is never read again; a
   * count under way when this is called serves only the requests that were waiting for it).
   */
  invalidate(accountId: string): void {
    this.generations.set(accountId, (this.generations.get(accountId) ?? 0) + 1);
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }
}
