import { RateLimiterRedis, RateLimiterMemory } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { FlexibleRateLimiter } from './rate-limiter';

/**
 * Cluster mode: the per-key count lives in Redis so 100 per minute holds across every process.
 * While Redis is unreachable, an in-memory limiter per process takes over (insurance) rather
 * than refusing all traffic or letting it through unlimited.
 */
export function createRedisRateLimiter(redis: Redis, prefix = 'fleet'): FlexibleRateLimiter {
  return new FlexibleRateLimiter(
    (points) =>
      new RateLimiterRedis({
        storeClient: redis,
        points,
        duration: 60,
        keyPrefix: `${prefix}:rl:${points}`,
        rejectIfRedisNotReady: true,
        insuranceLimiter: new RateLimiterMemory({ points, duration: 60 }),
      }),
  );
}
