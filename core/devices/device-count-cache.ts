/**
 * Recent `total` and `quota` answers of the device list, per account and filter. Automation and
 * dashboards ask for the same first page again and again; counting tens of thousands of matches
 * on each request would cost PostgreSQL milliseconds every time (bench/devices-list.bench.ts).
 * An entry lives `ttlMs` (default 1000 ms) and is dropped at once when this process claims,
 * unclaims or changes a device of the account. Changes made by another process (cluster) or by
 * heartbeats show up in `total` within `ttlMs`; the devices on the page are always read fresh.
 */
export class DeviceCountCache {
  private readonly entries = new Map<string, { total: number; quota: number; expires: number }>();
  private readonly generations = new Map<string, number>();

  constructor(private readonly options: { ttlMs?: number; maxEntries?: number; now?: () => number } = {}) {}

  private key(accountId: string, filterKey: string): string {
    return `${accountId}\u0000${this.generations.get(accountId) ?? 0}\u0000${filterKey}`;
  }

  get(accountId: string, filterKey: string): { total: number; quota: number } | undefined {
    const key = this.key(accountId, filterKey);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expires <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  set(accountId: string, filterKey: string, value: { total: number; quota: number }): void {
    if (this.entries.size >= (this.options.maxEntries ?? 10_000)) this.entries.clear();
    this.entries.set(this.key(accountId, filterKey), { ...value, expires: this.now() + (this.options.ttlMs ?? 1000) });
  }

  /** Every cached count of the account is stale now (its old generation is never read again). */
  invalidate(accountId: string): void {
    this.generations.set(accountId, (this.generations.get(accountId) ?? 0) + 1);
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }
}
