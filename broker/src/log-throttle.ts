/**
 * "Logged once per device per minute": a device that keeps sending garbage must not fill the
 * log. Remembers the last log time per key; forgets everything when it grows past a bound.
 */
export class LogThrottle {
  private last = new Map<string, number>();
  constructor(
    private readonly periodMs = 60_000,
    private readonly maxKeys = 100_000,
  ) {}

  shouldLog(key: string): boolean {
    const now = Date.now();
    const previous = this.last.get(key);
    if (previous !== undefined && now - previous < this.periodMs) return false;
    if (this.last.size >= this.maxKeys) this.last.clear();
    this.last.set(key, now);
    return true;
  }
}
