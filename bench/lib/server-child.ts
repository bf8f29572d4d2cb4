import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { writeHeapSnapshot } from 'node:v8';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { loadConfig } from '#core/config';
import { startFleetService } from '#api/app';
import { createLogger } from '#core/logger';
import { EMBEDDED_DATABASE_THREAD_NAME } from '#core/db/pglite-worker-client';
import { ownThreadCpuMicros } from './proc-cpu';

/**
 * The benchmarked server, in its own process so that its memory and CPU are measured apart from
 * the load generator. Driven over IPC by bench/lib/bench-server.ts. Environment: as `npm start`
 * (DATABASE_URL or DATA_DIR), with ports 0.
 */
type Request =
  | {
      id: number;
      cmd: 'createAccount';
      input: { name: string; quota: number; budget: number; unitPrice: number; rateLimitPerMinute: number };
    }
  | { id: number; cmd: 'sql'; sql: string; bindings?: unknown[] }
  | { id: number; cmd: 'memory' }
  | { id: number; cmd: 'cpu' }
  | { id: number; cmd: 'sampleRss'; action: 'start' | 'stop' }
  | { id: number; cmd: 'gc' }
  | { id: number; cmd: 'heapSnapshot'; file: string }
  | { id: number; cmd: 'profile'; action: 'start' }
  | { id: number; cmd: 'profile'; action: 'stop'; file: string }
  | { id: number; cmd: 'eventLoopDelay'; action: 'start' | 'stop' }
  | { id: number; cmd: 'stop' };

let peakRss = 0;
let sampler: NodeJS.Timeout | undefined;
let accounts = 0;
let profiler: Session | undefined;
let loopDelay: IntervalHistogram | undefined;

async function handle(req: Request): Promise<unknown> {
  switch (req.cmd) {
    case 'createAccount': {
      accounts += 1;
      const created = await service.services.accounts.create({
        name: req.input.name,
        quota: req.input.quota,
        budget: req.input.budget,
        currency: 'EUR',
        unitPrice: req.input.unitPrice,
        adminEmail: `bench${accounts}-${Date.now()}@example.test`,
        adminPassword: 'benchmark password',
      });
      await service.services.apiKeys.setRateLimit(created.apiKeyId, req.input.rateLimitPerMinute);
      return { accountId: created.accountId, apiKey: created.apiKey, apiKeyId: created.apiKeyId };
    }
    case 'sql': {
      // Bindings come from the benchmark script over IPC (trusted, same machine).
      const result = await service.database.knex.raw<{ rowCount?: number; rows?: unknown[] }>(
        req.sql,
        (req.bindings ?? []) as never,
      );
      return { rowCount: result.rowCount ?? 0, rows: result.rows ?? [] };
    }
    case 'memory':
      return process.memoryUsage();
    case 'cpu':
      // The embedded database's thread, part of the process's CPU (undefined on PostgreSQL).
      return { ...process.cpuUsage(), databaseThreadUs: ownThreadCpuMicros(EMBEDDED_DATABASE_THREAD_NAME) };
    case 'sampleRss':
      if (req.action === 'start') {
        peakRss = process.memoryUsage.rss();
        sampler = setInterval(() => {
          peakRss = Math.max(peakRss, process.memoryUsage.rss());
        }, 5);
        return { rss: peakRss };
      }
      if (sampler) clearInterval(sampler);
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
      return { peakRss };
    case 'gc':
      (globalThis as { gc?: () => void }).gc?.();
      return process.memoryUsage();
    case 'heapSnapshot':
      // What each kind of object holds (bench/lib/heap-summary.ts compares two snapshots).
      (globalThis as { gc?: () => void }).gc?.();
      return { file: writeHeapSnapshot(req.file) };
    case 'profile':
      // A CPU profile of one phase only (--cpu-prof would cover start-up and seeding too).
      if (req.action === 'start') {
        profiler = new Session();
        profiler.connect();
        await profiler.post('Profiler.enable');
        await profiler.post('Profiler.setSamplingInterval', { interval: 100 });
        await profiler.post('Profiler.start');
        return {};
      } else {
        if (!profiler) throw new Error('no profile was started');
        const { profile } = await profiler.post('Profiler.stop');
        writeFileSync(req.file, JSON.stringify(profile));
        profiler.disconnect();
        profiler = undefined;
        return { file: req.file };
      }
    case 'eventLoopDelay':
      // How long the loop was blocked during one phase (flushes, sweeps, embedded queries).
      if (req.action === 'start') {
        loopDelay?.disable();
        loopDelay = monitorEventLoopDelay({ resolution: 5 });
        loopDelay.enable();
        return {};
      } else {
        if (!loopDelay) throw new Error('no event-loop delay measurement was started');
        loopDelay.disable();
        const ms = (ns: number) => ns / 1e6;
        const result = {
          p50Ms: ms(loopDelay.percentile(50)),
          p99Ms: ms(loopDelay.percentile(99)),
          maxMs: ms(loopDelay.max),
        };
        loopDelay = undefined;
        return result;
      }
    case 'stop':
      await service.stop();
      setImmediate(() => process.exit(0));
      return {};
  }
}

process.on('message', (raw) => {
  const req = raw as Request;
  handle(req).then(
    (result) => process.send?.({ id: req.id, ok: true, result }),
    (error: unknown) =>
      process.send?.({ id: req.id, ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
});

// Ports 0 on a first start; a restart (BenchServer.restart) comes back on the ports it had.
const config = loadConfig({
  ...process.env,
  PORT: process.env.BENCH_PORT ?? '0',
  MQTT_PORT: process.env.BENCH_MQTT_PORT ?? '0',
  ...(process.env.BENCH_MQTTS_PORT ? { MQTTS_PORT: process.env.BENCH_MQTTS_PORT } : {}),
  HOST: '127.0.0.1',
  DEMO_ACCOUNT: 'false',
});
// Requests come once the parent heard `ready`, below: `service` is set by then.
const service = await startFleetService({ config, logger: createLogger(config.logLevel) });
process.send?.({
  ready: true,
  httpUrl: service.httpUrl,
  mqttUrl: service.mqttUrl,
  mqttsUrl: service.mqttsUrl,
  database: service.database.kind,
});
