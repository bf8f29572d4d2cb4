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

/**
 * Closes a connection without waiting on Redis when Redis is not there. One that is up QUITs, so
 * the replies it has in flight come first. One that is not is dropped: ioredis queues a QUIT
 * behind the commands waiting for a reconnect (so the stop waited for Redis to come back, and
 * the connection went on reconnecting when it did not), and a connection dropped while it waits
 * out its reconnect delay never emits 'end' (ioredis 6.0 leaves it 'reconnecting'), so a close
 * that waited for 'end' hung for good (seen in CI: test/faults/redis-restart.test.ts's teardown).
 */
export async function endRedisConnection(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  const ended = new Promise<void>((resolve) => redis.once('end', () => resolve()));
  if (redis.status === 'ready') await redis.quit().catch(() => undefined);
  else redis.disconnect();
  // Dropped in its reconnect delay: no socket is left to close, so no 'end' follows.
  if (redis.status === 'reconnecting') return;
  await ended;
}
