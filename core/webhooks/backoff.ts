/**
 * Retry schedule of a failed delivery: exponential from 5 s (the first retry comes 2.5 to 5 s
 * after the failure), doubling up to 6 hours, with "equal jitter" (half fixed, half random) so
 * many deliveries failing together do not retry together. A delivery is retried for 3 days
 * (RETRY_WINDOW_MS) after it was created, then marked failed; an endpoint whose deliveries
 * have all failed for 3 days (DISABLE_AFTER_MS) is disabled. Documented in docs/webhooks.md.
 */
export const FIRST_RETRY_MS = 5_000;
export const MAX_RETRY_DELAY_MS = 6 * 60 * 60_000;
export const RETRY_WINDOW_MS = 3 * 24 * 60 * 60_000;
export const DISABLE_AFTER_MS = 3 * 24 * 60 * 60_000;

/** Delay before the next attempt after `failedAttempts` (>= 1) failures. */
export function retryDelayMs(failedAttempts: number, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(failedAttempts, 1) - 1, 30);
  const full = Math.min(FIRST_RETRY_MS * 2 ** exponent, MAX_RETRY_DELAY_MS);
  return Math.round(full / 2 + random() * (full / 2));
}
