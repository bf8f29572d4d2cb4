import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PostgresBackendCpu } from './postgres-cpu';

/**
 * A real fleet server for benchmarks: a child process (so its RSS and CPU are its own) on free
 * ports, with an isolated database: a fresh PostgreSQL database on BENCH_DATABASE_URL (or
 * TEST_DATABASE_URL), else an embedded PGlite in a temporary folder. Dropped on stop().
 *
 *   const server = await startBenchServer();
 *   const account = await server.createAccount({ quota: 100_000 });   // key limit raised
 *   ... fetch(server.httpUrl + '/api/v1/devices', { headers: account.headers }) ...
 *   await server.stop();
 */
export interface BenchAccount {
  accountId: string;
  apiKey: string;
  apiKeyId: string;
  headers: Record<string, string>;
}

export interface BenchServer {
  httpUrl: string;
  /** mqtt://host:port of the server's device broker (null with MQTT_PORT=off). */
  mqttUrl: string;
  /** mqtts://host:port when the server was given TLS files, else null. */
  mqttsUrl: string | null;
  database: 'postgres' | 'embedded';
  pid: number;
  /**
   * A meter of the CPU of the PostgreSQL backends serving this server's database (null on the
   * embedded database, whose work is inside the server process's own CPU).
   */
  postgresCpu(): Promise<PostgresBackendCpu | null>;
  createAccount(
    input?: Partial<{ name: string; quota: number; budget: number; unitPrice: number; rateLimitPerMinute: number }>,
  ): Promise<BenchAccount>;
  /** Runs SQL inside the server process (the only way to reach an embedded database). */
  sql(sql: string, bindings?: unknown[]): Promise<{ rowCount: number; rows: unknown[] }>;
  memory(): Promise<NodeJS.MemoryUsage>;
  /**
   * The server process's CPU time so far (µs): diff two readings for the CPU a phase cost. On the
   * embedded database, `databaseThreadUs` is the part of it its database thread spent (Linux).
   */
  cpu(): Promise<NodeJS.CpuUsage & { databaseThreadUs?: number }>;
  /** Forces a GC in the server (it runs with --expose-gc) and returns its memory afterwards. */
  gc(): Promise<NodeJS.MemoryUsage>;
  /** Writes a heap snapshot of the server (after a GC) to `file` (.heapsnapshot). */
  heapSnapshot(file: string): Promise<void>;
  /** A CPU profile of the server (100 µs sampling) between start and stop, written to `file` (.cpuprofile). */
  startProfile(): Promise<void>;
  stopProfile(file: string): Promise<void>;
  /** The server's event-loop delay between start and stop (monitorEventLoopDelay, 5 ms resolution). */
  startEventLoopDelay(): Promise<void>;
  stopEventLoopDelay(): Promise<{ p50Ms: number; p99Ms: number; maxMs: number }>;
  /**
   * Stops the server process gracefully (its devices are disconnected) and starts a new one on
   * the same ports and database, at least `downMs` after the stop began; resolves when the new
   * one listens, with that moment (epoch ms).
   */
  restart(options?: { downMs?: number }): Promise<{ readyAtMs: number }>;
  /** Samples the server's RSS every 5 ms between start and stop; stop returns the peak. */
  startRssSampling(): Promise<{ rss: number }>;
  stopRssSampling(): Promise<{ peakRss: number }>;
  stop(): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));

export async function startBenchServer(options: { env?: Record<string, string> } = {}): Promise<BenchServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-bench-'));
  const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
  let databaseUrl: string | undefined;
  let dbName: string | undefined;
  if (adminUrl) {
    dbName = `fleet_bench_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const url = new URL(adminUrl);
    url.pathname = `/${dbName}`;
    databaseUrl = url.toString();
  }
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    DATA_DIR: dataDir,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...options.env,
  };
  if (!databaseUrl) delete env.DATABASE_URL;

  let server = await spawnServer(env);
  let stopped = false;
  const request = <T>(message: Record<string, unknown>): Promise<T> => server.request<T>(message);
  const bench: BenchServer = {
    ...server.urls,
    get pid() {
      return server.child.pid!;
    },
    postgresCpu: async () => (adminUrl && dbName ? PostgresBackendCpu.open({ adminUrl, database: dbName }) : null),
    async createAccount(input = {}) {
      const created = await request<{ accountId: string; apiKey: string; apiKeyId: string }>({
        cmd: 'createAccount',
        input: {
          name: 'Bench',
          quota: 1_000_000,
          budget: 1e9,
          unitPrice: 0.1,
          rateLimitPerMinute: 100_000_000,
          ...input,
        },
      });
      return { ...created, headers: { authorization: `Bearer ${created.apiKey}` } };
    },
    sql: (sql, bindings) => request({ cmd: 'sql', sql, bindings }),
    memory: () => request({ cmd: 'memory' }),
    cpu: () => request({ cmd: 'cpu' }),
    gc: () => request({ cmd: 'gc' }),
    heapSnapshot: async (file) => {
      await request({ cmd: 'heapSnapshot', file });
    },
    startProfile: () => request({ cmd: 'profile', action: 'start' }),
    stopProfile: (file) => request({ cmd: 'profile', action: 'stop', file }),
    startEventLoopDelay: () => request({ cmd: 'eventLoopDelay', action: 'start' }),
    stopEventLoopDelay: () => request({ cmd: 'eventLoopDelay', action: 'stop' }),
    startRssSampling: () => request({ cmd: 'sampleRss', action: 'start' }),
    stopRssSampling: () => request({ cmd: 'sampleRss', action: 'stop' }),
    async restart(restartOptions = {}) {
      const stoppedAt = performance.now();
      await server.stop();
      // Down for at least downMs from the stop on (a benchmark gives two brokers the same outage).
      const left = (restartOptions.downMs ?? 0) - (performance.now() - stoppedAt);
      if (left > 0) await new Promise((r) => setTimeout(r, left));
      const port = (url: string | null) => (url ? new URL(url).port : undefined);
      const ports = {
        BENCH_PORT: port(server.urls.httpUrl)!,
        BENCH_MQTT_PORT: port(server.urls.mqttUrl) ?? 'off',
        ...(server.urls.mqttsUrl ? { BENCH_MQTTS_PORT: port(server.urls.mqttsUrl)! } : {}),
      };
      server = await spawnServer({ ...env, ...ports });
      return { readyAtMs: performance.timeOrigin + performance.now() };
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (adminUrl && dbName) {
        const admin = new pg.Client({ connectionString: adminUrl });
        await admin.connect();
        await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
        await admin.end();
      }
    },
  };
  return bench;
}

interface ServerUrls {
  httpUrl: string;
  mqttUrl: string;
  mqttsUrl: string | null;
  database: 'postgres' | 'embedded';
}

/** One server process (bench/lib/server-child.ts), ready once its ports are bound. */
async function spawnServer(env: Record<string, string>) {
  const child: ChildProcess = fork(path.join(here, 'server-child.ts'), [], {
    execArgv: [
      '--import',
      'tsx',
      '--expose-gc',
      ...(process.env.BENCH_SERVER_NODE_OPTIONS?.split(' ').filter(Boolean) ?? []),
    ],
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const urls = await new Promise<ServerUrls>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code} before it was ready`)));
    child.on('message', (raw) => {
      const msg = raw as ServerUrls & { ready?: boolean; id?: number; ok?: boolean; result?: unknown; error?: string };
      if (msg.ready) {
        resolve({ httpUrl: msg.httpUrl, mqttUrl: msg.mqttUrl, mqttsUrl: msg.mqttsUrl, database: msg.database });
        return;
      }
      const waiter = msg.id === undefined ? undefined : pending.get(msg.id);
      if (!waiter) return;
      pending.delete(msg.id!);
      if (msg.ok) waiter.resolve(msg.result);
      else waiter.reject(new Error(msg.error));
    });
  });
  const request = <T>(message: Record<string, unknown>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ id, ...message });
    });
  return {
    child,
    urls,
    request,
    /** A graceful stop (drains, closes 10,000 device sessions) gets 30 s, then the process is killed. */
    async stop() {
      const exited = new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
      await Promise.race([
        request({ cmd: 'stop' }).catch(() => undefined),
        new Promise((r) => setTimeout(r, 30_000).unref()),
      ]);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
