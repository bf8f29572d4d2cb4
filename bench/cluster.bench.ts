import { readFileSync } from 'node:fs';
import { execFile, execSync } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { isSmoke, recordResults } from './lib/results';
import { processCpuMicros } from './lib/proc-cpu';
import { ServiceProcess } from '#test/helpers/service-process';
import { dropRedisKeys } from '#test/helpers/cluster';
import { Fleet, claimDevices, makeSerials, type DeviceCredentials } from '#simulator/fleet';

/**
 * Cluster benchmark: the same heartbeat load against 1 and 2 service processes in
 * cluster mode (shared PostgreSQL and Redis), and against the Mosquitto on 127.0.0.1:1883.
 * Devices are split evenly across the processes' own MQTT ports (a TCP balancer adds nothing
 * to what a process costs). Per process: heartbeats/s acknowledged and persisted, CPU seconds
 * used, RSS per connected device; so capacity per core is known.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/cluster.bench.ts [--devices N] [--seconds S] [--rate R]
 */
const smoke = isSmoke();
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DEVICES = smoke ? 40 : arg('devices', 6000);
const SECONDS = smoke ? 3 : arg('seconds', 20);
const RATE = smoke ? 40 : arg('rate', 12_000);
const adminUrl =
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const run = promisify(execFile);

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  return (processCpuMicros(pid) ?? 0) / 1e6;
}
function rssBytes(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
}
async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

interface Measured {
  name: string;
  processes: number;
  connected: number;
  rampSeconds: number;
  ackedPerSecond: number;
  persistedPerSecond?: number;
  cpuSecondsPerProcess?: number[];
  rssPerDeviceBytes?: number;
}

async function load(input: {
  name: string;
  urls: string[];
  devices: DeviceCredentials[];
  clean: boolean;
}): Promise<{ fleet: Fleet; connected: number; rampSeconds: number }> {
  const per = Math.ceil(input.devices.length / input.urls.length);
  const fleets = input.urls.map(
    (url, i) =>
      new Fleet({
        // The ramp runs at the protocol's default heartbeat (60 s), as a real reconnect storm does;
        // the load period is set once every device is connected.
        devices: input.devices.slice(i * per, (i + 1) * per),
        brokerUrl: url,
        firmware: '1.0.0',
        heartbeatS: 60,
        heartbeatQos: 1,
        clean: input.clean,
        connectRatePerS: 5000,
        maxPendingConnects: 1000,
      }),
  );
  const started = performance.now();
  const ramps = await Promise.all(fleets.map((f) => f.start()));
  const rampSeconds = (performance.now() - started) / 1000;
  for (const f of fleets) f.setHeartbeatPeriod(input.devices.length / RATE);
  // One Fleet-like view over all the parts.
  const all = {
    devices: fleets.flatMap((f) => f.devices),
    stats: () =>
      fleets.map((f) => f.stats()).reduce((a, s) => ({ ...a, heartbeatsAcked: a.heartbeatsAcked + s.heartbeatsAcked })),
    stop: async () => {
      for (const f of fleets) await f.stop();
    },
  };
  return { fleet: all as unknown as Fleet, connected: ramps.reduce((n, r) => n + r.connected, 0), rampSeconds };
}

async function measureService(processes: number): Promise<Measured> {
  const dbName = `fleet_bench_cluster_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  const env = {
    DATABASE_URL: url.toString(),
    DATA_DIR: `/tmp/${dbName}`,
    REDIS_URL,
    REDIS_KEY_PREFIX: dbName,
    FLEET_SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'error',
    NODE_ENV: 'production',
  };
  const nodes = Array.from({ length: processes }, () => new ServiceProcess(env));
  try {
    for (const node of nodes) await node.start();
    console.log(`${processes} process(es) ready`);
    const fleetEnv = { ...process.env, DATABASE_URL: env.DATABASE_URL, DATA_DIR: env.DATA_DIR };
    const { stdout } = await run(
      process.execPath,
      [
        path.resolve('bin/fleet.js'),
        'account',
        'create',
        '--name',
        'Bench',
        '--quota',
        String(DEVICES + 10),
        '--budget',
        '1000000',
        '--currency',
        'EUR',
        '--unit-price',
        '1',
        '--admin-email',
        `${dbName}@example.test`,
        '--admin-password',
        'correct horse battery',
        '--json',
      ],
      { env: fleetEnv },
    );
    const account = JSON.parse(stdout) as { api_key: string; api_key_id: string };
    await run(
      process.execPath,
      [path.resolve('bin/fleet.js'), 'api-key', 'rate-limit', '--key', account.api_key_id, '--per-minute', '1000000'],
      { env: fleetEnv },
    );
    await fetch(`${nodes[0]!.httpUrl}/api/v1/models`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Luma-100' }),
    });
    const devices = await claimDevices({
      apiUrl: nodes[0]!.httpUrl,
      apiKey: account.api_key,
      model: 'Luma-100',
      firmware: '1.0.0',
      serials: makeSerials(`CL${processes}`, DEVICES),
    });
    console.log(`claimed ${devices.length}`);
    const rssBefore = nodes.map((n) => rssBytes(n.pid!));
    const { fleet, connected, rampSeconds } = await load({
      name: `${processes} process(es)`,
      urls: nodes.map((n) => `mqtt://127.0.0.1:${n.mqttPort}`),
      devices,
      clean: false,
    });
    await new Promise((r) => setTimeout(r, 2000));
    const rssAfter = nodes.map((n) => rssBytes(n.pid!));
    const cpuStart = nodes.map((n) => cpuSeconds(n.pid!));
    const persistedStart = (
      await Promise.all(nodes.map((n) => metric(n.httpUrl, 'fleet_heartbeat_flush_rows_total')))
    ).reduce((a, b) => a + b, 0);
    const ackedStart = fleet.stats().heartbeatsAcked;
    const started = performance.now();
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const elapsed = (performance.now() - started) / 1000;
    const acked = (fleet.stats().heartbeatsAcked - ackedStart) / elapsed;
    const persisted =
      ((await Promise.all(nodes.map((n) => metric(n.httpUrl, 'fleet_heartbeat_flush_rows_total')))).reduce(
        (a, b) => a + b,
        0,
      ) -
        persistedStart) /
      elapsed;
    const cpu = nodes.map((n, i) => cpuSeconds(n.pid!) - cpuStart[i]!);
    await fleet.stop();
    const rssPerDevice = rssAfter.reduce((a, b) => a + b, 0) - rssBefore.reduce((a, b) => a + b, 0);
    return {
      name: `fleet service, ${processes} process${processes > 1 ? 'es' : ''}`,
      processes,
      connected,
      rampSeconds,
      ackedPerSecond: acked,
      persistedPerSecond: persisted,
      cpuSecondsPerProcess: cpu.map((c) => c / elapsed),
      rssPerDeviceBytes: rssPerDevice / Math.max(1, connected),
    };
  } finally {
    console.log('stopping');
    for (const node of nodes) await node.stop();
    console.log('stopped');
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    await dropRedisKeys(dbName, REDIS_URL);
  }
}

async function measureMosquitto(): Promise<Measured | null> {
  try {
    execSync('pgrep -x mosquitto');
  } catch {
    return null;
  }
  const devices = makeSerials(`CLMOSQ${process.pid}`, DEVICES).map((serial) => ({
    serial,
    username: serial,
    password: 'x',
  }));
  const { fleet, connected, rampSeconds } = await load({
    name: 'Mosquitto',
    urls: ['mqtt://127.0.0.1:1883'],
    devices,
    clean: true,
  });
  await new Promise((r) => setTimeout(r, 2000));
  const ackedStart = fleet.stats().heartbeatsAcked;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const acked = (fleet.stats().heartbeatsAcked - ackedStart) / ((performance.now() - started) / 1000);
  await fleet.stop();
  return { name: 'Mosquitto (127.0.0.1:1883)', processes: 1, connected, rampSeconds, ackedPerSecond: acked };
}

// Cluster mode needs PostgreSQL and Redis: say so and stop when they are not there.
try {
  const probe = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2000 });
  await probe.connect();
  await probe.end();
  const { Redis } = await import('ioredis');
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  await redis.connect();
  redis.disconnect();
} catch (error) {
  console.log(
    `cluster benchmark skipped: needs PostgreSQL (${adminUrl}) and Redis (${REDIS_URL}): ${(error as Error).message}`,
  );
  process.exit(0);
}

const results: Measured[] = [];
for (const processes of [1, 2]) {
  const r = await measureService(processes);
  console.log(JSON.stringify(r));
  results.push(r);
}
const mosq = await measureMosquitto();
if (mosq) results.push(mosq);

const figures = results.map(
  (r) =>
    `${r.name}: ${r.connected}/${DEVICES} connected in ${r.rampSeconds.toFixed(1)} s; **${r.ackedPerSecond.toFixed(0)} heartbeats/s acknowledged**` +
    (r.persistedPerSecond !== undefined ? `, **${r.persistedPerSecond.toFixed(0)} rows/s persisted**` : '') +
    (r.cpuSecondsPerProcess
      ? `; CPU per process ${r.cpuSecondsPerProcess.map((c) => `${(c * 100).toFixed(0)} %`).join(', ')} of a core`
      : '') +
    (r.rssPerDeviceBytes !== undefined
      ? `; ${(r.rssPerDeviceBytes / 1024).toFixed(1)} KB RSS per connected device`
      : ''),
);
const one = results[0]!;
const two = results[1]!;
const perCore = (r: Measured) =>
  (r.persistedPerSecond ?? 0) /
  Math.max(
    0.01,
    (r.cpuSecondsPerProcess ?? [1]).reduce((a, b) => a + b, 0),
  );
figures.push(
  `heartbeats persisted per CPU-second of service: 1 process ${perCore(one).toFixed(0)}, 2 processes ${perCore(two).toFixed(0)}`,
  `2 processes / 1 process: ${(two.ackedPerSecond / one.ackedPerSecond).toFixed(2)}x acknowledged` +
    (mosq ? `; fleet service (1 process) / Mosquitto: ${(one.ackedPerSecond / mosq.ackedPerSecond).toFixed(2)}x` : ''),
);
for (const f of figures) console.log(f);
if (!smoke && !process.argv.includes('--dry')) {
  recordResults({
    title: `Cluster mode: ${DEVICES} devices, ${RATE} heartbeats/s offered, 1 and 2 processes on PostgreSQL + Redis, vs Mosquitto`,
    command: `node --import tsx bench/cluster.bench.ts ${process.argv.slice(2).join(' ')}`.trim(),
    figures,
    notes: [
      'All processes (load generator, 1 or 2 service processes, PostgreSQL, Redis) share the same 2 cores: the 2-process figure shows cost and correctness of sharing, not the scaling a second machine gives.',
      'Capacity per core is the persisted-per-CPU-second figure: it is what sizing in docs/scaling.md uses.',
    ],
  });
}
process.exit(0);
