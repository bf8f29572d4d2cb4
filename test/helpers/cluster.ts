import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { loadConfig } from '#core/config';
import { startFleetService, type FleetService } from '#api/app';
import { createLogger } from '#core/logger';
import { createTestDatabase, type TestDatabase } from './test-database';

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Cluster tests need PostgreSQL (TEST_DATABASE_URL) and a reachable Redis. */
export async function clusterAvailable(): Promise<{ ok: boolean; why?: string }> {
  if (!process.env.TEST_DATABASE_URL) return { ok: false, why: 'TEST_DATABASE_URL is not set' };
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
    return { ok: true };
  } catch {
    return { ok: false, why: `no Redis at ${REDIS_URL}` };
  } finally {
    redis.disconnect();
  }
}

export interface TestCluster {
  nodes: FleetService[];
  db: TestDatabase;
  prefix: string;
  /** Starts one more process's worth of services on the same database and Redis (a process joining, or one restarted). */
  addNode(): Promise<FleetService>;
  close(): Promise<void>;
}

/** N service processes' worth of services in this process, sharing one PostgreSQL database and Redis. */
export async function startTestCluster(count: number, env: Record<string, string> = {}): Promise<TestCluster> {
  const db = await createTestDatabase();
  const prefix = `fleet-test-${randomBytes(4).toString('hex')}`;
  const nodes: FleetService[] = [];
  const addNode = async (): Promise<FleetService> => {
    const config = loadConfig({
      PORT: '0',
      MQTT_PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: db.dataDir,
      DATABASE_URL: db.databaseUrl!,
      REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      DEMO_ACCOUNT: 'false',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      ...env,
    });
    const node = await startFleetService({ config, logger: createLogger(config.logLevel) });
    nodes.push(node);
    return node;
  };
  for (let i = 0; i < count; i++) await addNode();
  return {
    nodes,
    db,
    prefix,
    addNode,
    async close() {
      for (const node of nodes) await node.stop().catch(() => undefined);
      await db.drop();
      await dropRedisKeys(prefix);
    },
  };
}

/** Deletes what a test cluster (or a benchmark) left in the shared Redis under `prefix:` (sessions, subscriptions, retained messages). */
export async function dropRedisKeys(prefix: string, url: string = REDIS_URL): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
