import { loadConfig, type Config } from '#core/config';
import { startFleetService, type FleetService } from '#api/app';
import { createLogger, type Logger } from '#core/logger';
import type { Clock } from '#core/shared/clock';
import { createTestDatabase, embeddedThreadEnv, type TestDatabase } from './test-database';
import { ApiClient } from './api-client';
import type { HostResolver } from '#core/webhooks/url-guard';

export interface TestServer {
  service: FleetService;
  config: Config;
  db: TestDatabase;
  /** Creates an account with an admin key; `api` talks to the server with that key. */
  createAccount(overrides?: Partial<AccountOverrides>): Promise<TestAccount>;
  /** Stops the service and starts it again on the same database (and, by default, ports). */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export interface AccountOverrides {
  name: string;
  quota: number;
  budget: number;
  unitPrice: number;
  currency: string;
  adminEmail: string;
  adminPassword: string;
  /** The API key's requests per minute, where a test polls faster than the default allows (the operator can lift it). */
  rateLimitPerMinute: number;
}

export interface TestAccount {
  accountId: string;
  apiKey: string;
  apiKeyId: string;
  adminEmail: string;
  adminPassword: string;
  api: ApiClient;
}

let accountCounter = 0;

/** A real server on free ports (HTTP and MQTT) with its own database; no demo account. */
export async function startTestServer(
  options: {
    clock?: Clock;
    env?: Record<string, string>;
    resolveHost?: HostResolver;
    /** CA of the service certificate, for the account API clients over HTTPS. */ tlsCa?: string;
    /** The service's logger (a test that reads what was logged); default: LOG_LEVEL to stdout. */
    logger?: Logger;
  } = {},
): Promise<TestServer> {
  const db = await createTestDatabase();
  const config = loadConfig({
    PORT: '0',
    MQTT_PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: db.dataDir,
    ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DEMO_ACCOUNT: 'false',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ...embeddedThreadEnv(),
    ...options.env,
  });
  const logger = options.logger ?? createLogger(config.logLevel);
  const extra = {
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.resolveHost ? { resolveHost: options.resolveHost } : {}),
  };
  let service: FleetService;
  try {
    service = await startFleetService({ config, logger, ...extra });
  } catch (error) {
    // A start a test expects to fail (a taken port) still leaves no database behind: found as a
    // migrated, empty fleet_test_* database after every PostgreSQL run of the suite.
    await db.drop().catch(() => undefined);
    throw error;
  }

  const server: TestServer = {
    get service() {
      return service;
    },
    config,
    db,
    async createAccount(overrides = {}) {
      accountCounter += 1;
      const adminEmail = overrides.adminEmail ?? `admin${accountCounter}-${Date.now()}@example.test`;
      const adminPassword = overrides.adminPassword ?? 'correct horse battery';
      const created = await service.services.accounts.create({
        name: overrides.name ?? `Account ${accountCounter}`,
        quota: overrides.quota ?? 1000,
        budget: overrides.budget ?? 100_000,
        currency: overrides.currency ?? 'EUR',
        unitPrice: overrides.unitPrice ?? 1,
        adminEmail,
        adminPassword,
      });
      if (overrides.rateLimitPerMinute !== undefined)
        await service.database
          .knex('api_keys')
          .where({ id: created.apiKeyId })
          .update({ rate_limit_per_minute: overrides.rateLimitPerMinute });
      return {
        accountId: created.accountId,
        apiKey: created.apiKey,
        apiKeyId: created.apiKeyId,
        adminEmail,
        adminPassword,
        api: new ApiClient(service.httpUrl, created.apiKey, options.tlsCa),
      };
    },
    async restart() {
      await service.stop();
      const pinned = loadConfig({
        PORT: String(service.httpPort),
        MQTT_PORT: String(service.mqttPort ?? 0),
        HOST: '127.0.0.1',
        DATA_DIR: db.dataDir,
        ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
        LOG_LEVEL: config.logLevel,
        DEMO_ACCOUNT: 'false',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        ...embeddedThreadEnv(),
        ...options.env,
      });
      service = await startFleetService({ config: pinned, logger, ...extra });
    },
    async close() {
      await service.stop();
      await db.drop();
    },
  };
  return server;
}
