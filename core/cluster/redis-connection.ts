import { Redis } from 'ioredis';
import type { Logger } from '../logger';

/**
 * Redis connections for cluster mode. Commands and subscriptions need separate connections
 * (a subscribed connection can only subscribe). Reconnects forever with a capped backoff, so
 * a Redis restart heals without restarting the service.
 */
export function createRedis(url: string, logger: Logger, name: string): Redis {
  const redis = new Redis(url, {
    connectionName: `fleet-${name}`,
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  let down = false;
  redis.on('error', (error: Error) => {
    if (!down) logger.warn({ err: error, connection: name }, 'redis connection error');
    down = true;
  });
  redis.on('ready', () => {
    if (down) logger.info({ connection: name }, 'redis connection restored');
    down = false;
  });
  return redis;
}

export async function redisHealthy(redis: Redis, timeoutMs = 1000): Promise<boolean> {
  try {
    // A PING answers PONG or fails: getting an answer in time is the test.
    await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), timeoutMs).unref()),
    ]);
    return true;
  } catch {
    return false;
  }
}
