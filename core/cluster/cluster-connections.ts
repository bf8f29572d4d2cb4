import type { Redis } from 'ioredis';
import type { Logger } from '../logger';
import { createRedis, endRedisConnection } from './redis-connection';

/** The Redis connections one process holds in cluster mode. */
export interface ClusterConnections {
  url: string;
  /** Commands: rate limits, health checks, event publishing. */
  commands: Redis;
  publisher: Redis;
  /** Subscribed connection for the event bus. */
  subscriber: Redis;
  close(): Promise<void>;
}

export function createClusterConnections(url: string, logger: Logger): ClusterConnections {
  const commands = createRedis(url, logger, 'commands');
  const publisher = createRedis(url, logger, 'publisher');
  const subscriber = createRedis(url, logger, 'subscriber');
  return {
    url,
    commands,
    publisher,
    subscriber,
    async close() {
      await Promise.all([commands, publisher, subscriber].map(endRedisConnection));
    },
  };
}
