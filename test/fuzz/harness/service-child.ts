import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { openDatabase } from '#core/db/database';
import { createTransactionRunner } from '#core/db/transaction';
import { createLogger } from '#core/logger';
import { createServices } from '#core/services';
import { systemClock } from '#core/shared/clock';
import { createTestDatabase, type TestDatabase } from '../../helpers/test-database';
import { freePort } from '../../helpers/haproxy';

/**
 * The service under fuzz, as a real OS process (`npm start`'s entry point) on its own test
 * database, not in the vitest worker: a request that throws out of a listener ends that process
 * the way it would end production, and the suite reports it as a failed property with the case
 * that did it (and the crash's stack from the child's stderr) instead of losing the worker.
 * The account (admin key, no practical rate limit) is written before the process starts, the
 * same way `fleet account create` does, so the embedded database has one owner at a time.
 */
export class FuzzService {
  readonly db: TestDatabase;
  readonly apiKey: string;
  readonly accountId: string;
  httpPort = 0;
  mqttPort = 0;
  private child: ChildProcess | undefined;
  private output = '';
  private exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  /** Starts after the first one: each one is a crash (or a hang) the suite recovered from. */
  restarts = 0;

  private constructor(
    db: TestDatabase,
    account: { apiKey: string; accountId: string },
    private readonly env: Record<string, string>,
  ) {
    this.db = db;
    this.apiKey = account.apiKey;
    this.accountId = account.accountId;
  }

  /** `env`: settings of the service beyond the test defaults (MAX_FIRMWARE_BYTES, ...). */
  static async start(env: Record<string, string> = {}): Promise<FuzzService> {
    const db = await createTestDatabase();
    const account = await seedAccount(db);
    const service = new FuzzService(db, account, env);
    await service.spawn();
    return service;
  }

  get httpUrl(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  get dataDir(): string {
    return this.db.dataDir;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** False once the process exited (crashed, or was stopped). */
  isAlive(): boolean {
    return this.child !== undefined && this.exit === null;
  }

  /** How the process ended, in words, with the end of its output (the crash's stack trace). */
  describeExit(): string {
    if (!this.exit) return 'the service process is running';
    const how = this.exit.signal ? `signal ${this.exit.signal}` : `exit code ${this.exit.code}`;
    return `the service process ended (${how}); its last output:\n${this.output.slice(-6000)}`;
  }

  logs(): string {
    return this.output;
  }

  /** Starts the process again on the same database and ports after a crash (or a hang). */
  async restart(): Promise<void> {
    await this.kill();
    this.restarts += 1;
    await this.spawn();
  }

  async close(): Promise<void> {
    const child = this.child;
    if (child && this.exit === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    await this.db.drop();
  }

  private async kill(): Promise<void> {
    const child = this.child;
    if (!child || this.exit !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  private async spawn(timeoutMs = 90_000): Promise<void> {
    if (!this.httpPort) this.httpPort = await freePort();
    if (!this.mqttPort) this.mqttPort = await freePort();
    this.output = '';
    this.exit = null;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: String(this.httpPort),
      MQTT_PORT: String(this.mqttPort),
      HOST: '127.0.0.1',
      DATA_DIR: this.db.dataDir,
      // Warnings and errors only: what a crash or a 500 logs is what the report shows.
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      DEMO_ACCOUNT: 'false',
      ...this.env,
    };
    if (this.db.databaseUrl) env.DATABASE_URL = this.db.databaseUrl;
    else delete env.DATABASE_URL;
    const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('api/src/main.ts')], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    const keep = (d: Buffer) => (this.output = (this.output + d.toString()).slice(-40_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    // The service must not outlive the test process (a worker killed at its timeout, say).
    const killChild = () => child.kill('SIGKILL');
    process.once('exit', killChild);
    child.once('exit', (code, signal) => {
      process.off('exit', killChild);
      if (this.child === child) this.exit = { code, signal };
    });
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      if (!this.isAlive()) throw new Error(`the service did not start: ${this.describeExit()}`);
      if ((await probe(this.httpPort, '/readyz', 2000)) === 200) return;
      await new Promise((r) => setTimeout(r, 150));
    }
    throw new Error(`the service was not ready within ${timeoutMs} ms:\n${this.output.slice(-6000)}`);
  }
}

/** An account with an admin key whose rate limit the fuzzer never reaches. */
async function seedAccount(db: TestDatabase): Promise<{ apiKey: string; accountId: string }> {
  const database = await openDatabase({ databaseUrl: db.databaseUrl, dataDir: db.dataDir, poolSize: 2 });
  try {
    await database.migrate();
    const services = createServices({
      knex: database.knex,
      transaction: createTransactionRunner(database.knex, () => undefined),
      clock: systemClock,
      logger: createLogger('silent'),
    });
    const created = await services.accounts.create({
      name: 'Fuzz Lighting',
      quota: 1_000_000,
      budget: 100_000_000,
      currency: 'EUR',
      unitPrice: 0.01,
      adminEmail: 'fuzz-admin@example.test',
      adminPassword: 'correct horse battery staple',
    });
    await services.apiKeys.setRateLimit(created.apiKeyId, 100_000_000);
    return { apiKey: created.apiKey, accountId: created.accountId };
  } finally {
    await database.close();
  }
}

/**
 * GET on a fresh connection that is closed after the answer (no keep-alive socket stays behind
 * to blur the descriptor count): the status, or null when nothing answered within `timeoutMs`.
 */
export function probe(port: number, pathname: string, timeoutMs: number): Promise<number | null> {
  return new Promise((resolve) => {
    const req = http.get(
      {
        host: '127.0.0.1',
        port,
        path: pathname,
        agent: false,
        headers: { connection: 'close' },
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? null));
        res.on('error', () => resolve(null));
      },
    );
    req.on('error', () => resolve(null));
  });
}
