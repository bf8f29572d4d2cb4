import { describe, it, expect } from 'vitest';
import { FIRST_RETRY_MS, MAX_RETRY_DELAY_MS, retryDelayMs } from '#core/webhooks/backoff';

const S = 1000;
const H = 60 * 60 * S;

describe('webhook retry backoff', () => {
  // [failed attempts, full delay]: the delay lies in [full / 2, full] ("equal jitter").
  it.each([
    [0, 5 * S],
    [1, 5 * S],
    [2, 10 * S],
    [3, 20 * S],
    [4, 40 * S],
    [10, 2560 * S],
    [12, 10240 * S],
    [13, 20480 * S],
    [14, 6 * H],
    [30, 6 * H],
    [1000, 6 * H],
  ])('after %i failures: between half of and %i ms', (failures, full) => {
    expect(retryDelayMs(failures, () => 0)).toBe(full / 2);
    expect(retryDelayMs(failures, () => 0.5)).toBe((full * 3) / 4);
    expect(retryDelayMs(failures, () => 1)).toBe(full);
  });

  it('starts at FIRST_RETRY_MS and never exceeds MAX_RETRY_DELAY_MS', () => {
    expect(retryDelayMs(1, () => 1)).toBe(FIRST_RETRY_MS);
    for (let n = 1; n < 60; n++) expect(retryDelayMs(n)).toBeLessThanOrEqual(MAX_RETRY_DELAY_MS);
  });
});
