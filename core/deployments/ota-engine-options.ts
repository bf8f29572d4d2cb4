/** Engine timing; every value configurable (config.ts OTA_* variables, tests pass small ones). */
export interface OtaEngineOptions {
  /** A non-final step without news for this long ends `timed_out`. Default 15 min. */
  stepTimeoutMs: number;
  /** After the device said `succeeded`, how long it has to come back on the target version. Default 10 min. */
  bootTimeoutMs: number;
  /** A `sent` command without any answer is published again (same job id) after this long. Default 60 s. */
  resendAfterMs: number;
  /** Lifetime of a download link. Default 6 h. */
  linkTtlMs: number;
  /** Safety sweep (deadlines, windows, scheduled starts, re-sends). Default 5 s; 0 disables the timer. */
  sweepIntervalMs: number;
  /**
   * Commands in a deployment's first dispatch transaction; each next one doubles up to
   * `dispatchMaxPage`. Small first, so the first commands leave about 0.5 s after the deploy
   * request; growing, so a large campaign is still a few transactions. One page of 10,000 held
   * 10,000 device rows locked for over a second (heartbeat flushes waited behind it) and sent
   * the first command 1.7-2.1 s after the request, every command no sooner (bench/ota.bench.ts).
   * Default 1000.
   */
  dispatchFirstPage: number;
  /** Most commands in one dispatch transaction. Default 10,000. */
  dispatchMaxPage: number;
  /**
   * How long the sweep leaves alone a running deployment whose last dispatch found no queued
   * update of a device that is online and said what it runs: those devices dispatch their own
   * update when they are heard, so the sweep only backs that up. Default 60 s.
   */
  quietResweepMs: number;
}

export const DEFAULT_OTA_OPTIONS: OtaEngineOptions = {
  stepTimeoutMs: 15 * 60_000,
  bootTimeoutMs: 10 * 60_000,
  resendAfterMs: 60_000,
  linkTtlMs: 6 * 3600_000,
  sweepIntervalMs: 5000,
  dispatchFirstPage: 1000,
  dispatchMaxPage: 10_000,
  quietResweepMs: 60_000,
};

export interface OtaMetrics {
  published(n: number): void;
  ignored(reason: string): void;
  finished(state: string, n: number): void;
  /** A failure report whose `error_code` is outside the protocol's vocabulary (recorded as `other`). */
  unknownErrorCode?(): void;
  /** A device's `ota/lock` message stored: its reason (`release` for a release), and whether it was cut to the cap. */
  lock?(input: { reason: string; capped: boolean }): void;
}
