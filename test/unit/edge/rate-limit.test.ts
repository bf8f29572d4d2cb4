import { describe, it, expect } from 'vitest';
import { CallerRateLimit, rateCharge } from '#edge/rate-limit';
import type { RateDecision, RateLimiter } from '#core/rate-limit/rate-limiter';

const keyCaller = {
  actor: { accountId: 'a1', role: 'admin' as const, principal: 'api_key:k1', apiKeyId: 'k1' },
  rateLimitPerMinute: 2,
};

class CountingLimiter implements RateLimiter {
  readonly calls: Array<{ key: string; limit: number; units: number }> = [];
  private used = 0;
  consume(key: string, limitPerMinute: number, units = 1): Promise<RateDecision> {
    this.calls.push({ key, limit: limitPerMinute, units });
    this.used += units;
    const allowed = this.used <= limitPerMinute;
    return Promise.resolve({
      allowed,
      limit: limitPerMinute,
      remaining: Math.max(0, limitPerMinute - this.used),
      resetSeconds: allowed ? 42 : 0.2,
    });
  }
}

describe('the rate-limit decision at the HTTP edge', () => {
  it('charges API-key callers and leaves session callers alone', async () => {
    const limiter = new CountingLimiter();
    let refused = 0;
    const limit = new CallerRateLimit(limiter, () => (refused += 1));
    expect(await limit.charge({ actor: { accountId: 'a1', role: 'viewer', principal: 'user:u1' } })).toBeNull();
    expect(limiter.calls).toEqual([]);

    const first = await limit.charge(keyCaller);
    expect(first).toMatchObject({
      allowed: true,
      headers: [
        ['ratelimit-limit', '2'],
        ['ratelimit-remaining', '1'],
        ['ratelimit-reset', '42'],
      ],
    });
    const second = await limit.charge(keyCaller, 2);
    expect(second).toMatchObject({
      allowed: false,
      retryAfterSeconds: 1,
      message: 'Rate limit of 2 requests per minute exceeded.',
    });
    expect(limiter.calls).toEqual([
      { key: 'k1', limit: 2, units: 1 },
      { key: 'k1', limit: 2, units: 2 },
    ]);
    expect(refused).toBe(1);
  });

  it.each([
    [0, 1],
    [0.4, 1],
    [1, 1],
    [2.1, 3],
    [59, 59],
  ])('a refusal resetting in %s s says Retry-After %s', (resetSeconds, retryAfter) => {
    expect(rateCharge({ allowed: false, limit: 1, remaining: 0, resetSeconds }).retryAfterSeconds).toBe(retryAfter);
  });
});
