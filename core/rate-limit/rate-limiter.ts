import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

/**
 * Fixed-window counter per API key (100 per minute by default). In one process the counts live
 * in memory; cluster mode swaps in a Redis-backed store so the limit holds across processes.
 */
export interface RateLimiter {
  /** Counts `units` requests (default 1) against the key's minute; refused once past the limit. */
  consume(key: string, limitPerMinute: number, units?: number): Promise<RateDecision>;
}

type LimiterFactory = (points: number) => RateLimiterAbstract;

export class FlexibleRateLimiter implements RateLimiter {
  // rate-limiter-flexible fixes `points` per limiter, so one limiter per distinct limit value.
  private readonly limiters = new Map<number, RateLimiterAbstract>();
  constructor(private readonly factory: LimiterFactory = (points) => new RateLimiterMemory({ points, duration: 60 })) {}

  async consume(key: string, limitPerMinute: number, units = 1): Promise<RateDecision> {
    let limiter = this.limiters.get(limitPerMinute);
    if (!limiter) {
      limiter = this.factory(limitPerMinute);
      this.limiters.set(limitPerMinute, limiter);
    }
    try {
      const res = await limiter.consume(key, units);
      return {
        allowed: true,
        limit: limitPerMinute,
        remaining: res.remainingPoints,
        resetSeconds: Math.ceil(res.msBeforeNext / 1000),
      };
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        return {
          allowed: false,
          limit: limitPerMinute,
          remaining: 0,
          resetSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)),
        };
      }
      throw rejection;
    }
  }
}
