import { openDatabase, type Database } from '#core/db/database';
import { createTransactionRunner } from '#core/db/transaction';
import { createServices, type Services, type ServiceOptions } from '#core/services';
import { createLogger } from '#core/logger';
import { systemClock, type Clock } from '#core/shared/clock';
import type { Actor } from '#core/shared/actor';
import { createTestDatabase, testEmbeddedThread, type TestDatabase } from './test-database';

/**
 * The domain services over a test database of their own, without HTTP, GraphQL or MQTT: the
 * floor for a rule of one service (quota, idempotency, claims, throttles). It starts in a tenth
 * of the time a whole service takes, and a failure points at the service, not at the wire.
 * What needs the wire (problem+json mapping, per-route tenant isolation, MQTT delivery guards,
 * the contract suite) stays on test-server.ts.
 */
export interface ServiceHarness {
  services: Services;
  database: Database;
  /** An account with an admin actor (what an admin API key of it would be). */
  createAccount(overrides?: { quota?: number; budget?: number; unitPrice?: number }): Promise<HarnessAccount>;
  close(): Promise<void>;
}

export interface HarnessAccount {
  accountId: string;
  /** The admin API key's actor. */
  admin: Actor;
  apiKeyId: string;
}

let accounts = 0;

export async function startServiceHarness(
  options: { clock?: Clock; services?: Omit<ServiceOptions, 'firmware'> } = {},
): Promise<ServiceHarness> {
  const db: TestDatabase = await createTestDatabase();
  const database = await openDatabase({
    databaseUrl: db.databaseUrl,
    dataDir: db.dataDir,
    embeddedThread: testEmbeddedThread(),
    poolSize: 4,
  });
  await database.migrate();
  const clock = options.clock ?? systemClock;
  const logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  const services = createServices(
    { knex: database.knex, transaction: createTransactionRunner(database.knex, () => undefined), clock, logger },
    { ...options.services, firmware: { dataDir: db.dataDir, maxFirmwareBytes: 16 * 1024 * 1024 } },
  );
  return {
    services,
    database,
    async createAccount(overrides = {}) {
      accounts += 1;
      const created = await services.accounts.create({
        name: `Harness account ${accounts}`,
        quota: overrides.quota ?? 1000,
        budget: overrides.budget ?? 100_000,
        currency: 'EUR',
        unitPrice: overrides.unitPrice ?? 1,
        adminEmail: `harness${accounts}-${Date.now()}@example.test`,
        adminPassword: 'correct horse battery',
      });
      const key = await services.apiKeys.authenticate(created.apiKey);
      if (!key) throw new Error("the new account's admin key did not authenticate");
      return { accountId: created.accountId, admin: key.actor, apiKeyId: created.apiKeyId };
    },
    async close() {
      await database.close();
      await db.drop();
    },
  };
}
