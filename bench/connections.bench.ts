import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, fetch } from 'undici';
import { startBenchServer } from './lib/bench-server';
import { startFleetProcess } from './lib/fleet-process';
import { postgresCpuMicros } from './lib/postgres-cpu';
import { isSmoke, recordResults } from './lib/results';
import { claimDevices, makeSerials, type DeviceCredentials } from '../simulator/src/fleet';
import { makeTlsFiles } from '../test/helpers/tls';

/**
 * What a device connection over TLS costs the service, against bare Aedes behind the same TLS
 * listener settings under the same client in the same run: a ramp of N simulated devices (the
 * simulator engine, in a process of its own) connecting to MQTTS, once with passwords and once
 * with client certificates signed by the service's device CA. The TLS handshake dominates both;
 * the figure is CPU time per connection of the broker's process (and of PostgreSQL, for ours)
 * and its ratio to bare Aedes.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/connections-tls.bench.ts
 *   options: --dry (print, record nothing) --devices N (default 2000) --rounds R (default 3, after
 *   one warm-up round that is not counted: the first connections pay for JIT compilation)
 */
const smoke = isSmoke();
const dry = process.argv.includes('--dry');
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DEVICES = smoke ? 20 : arg('devices', 2000);
const ROUNDS = smoke ? 1 : arg('rounds', 3);
const RATE = 500;
const here = path.dirname(fileURLToPath(import.meta.url));
const cpuMicros = (c: NodeJS.CpuUsage) => c.user + c.system;

interface Ramp {
  connected: number;
  seconds: number;
  /** Broker process CPU per connection (µs). */
  brokerUs: number;
  /** PostgreSQL CPU per connection (µs), ours only. */
  postgresUs?: number;
}

/** Connects `devices` to `url` at RATE/s, reading `cpu` before and after; returns the ramp's figures. */
async function ramp(
  url: string,
  devices: DeviceCredentials[],
  ca: string,
  cpu: () => Promise<number>,
  withPostgres: boolean,
): Promise<Ramp> {
  const fleet = startFleetProcess({
    devices,
    brokerUrl: url,
    ca,
    firmware: '1.0.0',
    heartbeatS: 600,
    connectRatePerS: RATE,
    maxPendingConnects: 200,
  });
  try {
    const pg0 = withPostgres ? postgresCpuMicros() : undefined;
    const cpu0 = await cpu();
    const result = await fleet.start();
    // Presence writes of the last connections land with the next flush (at most 1 s later).
    await new Promise((r) => setTimeout(r, 1200));
    const cpu1 = await cpu();
    const pg1 = withPostgres ? postgresCpuMicros() : undefined;
    const n = Math.max(1, result.connected);
    return {
      connected: result.connected,
      seconds: result.seconds,
      brokerUs: (cpu1 - cpu0) / n,
      ...(pg0 !== undefined && pg1 !== undefined ? { postgresUs: (pg1 - pg0) / n } : {}),
    };
  } finally {
    await fleet.stop();
  }
}

async function bareAedes(certFile: string, keyFile: string) {
  const child = fork(path.join(here, 'connections-bare-aedes-tls.server.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const waiting = new Map<number, (msg: { cpu: NodeJS.CpuUsage }) => void>();
  const port = await new Promise<number>((resolve) =>
    child.on('message', (raw) => {
      const msg = raw as { ready?: boolean; port?: number; id?: number; cpu: NodeJS.CpuUsage };
      if (msg.ready) resolve(msg.port!);
      else if (msg.id !== undefined) waiting.get(msg.id)?.(msg);
    }),
  );
  const ask = (cmd: 'stats' | 'stop') =>
    new Promise<{ cpu: NodeJS.CpuUsage }>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      child.send({ id, cmd });
    });
  return {
    url: `mqtts://127.0.0.1:${port}`,
    cpu: async () => cpuMicros((await ask('stats')).cpu),
    stop: async () => {
      await ask('stop');
    },
  };
}

const tlsFiles = makeTlsFiles();
const ca = fs.readFileSync(tlsFiles.caFile, 'utf8');
const server = await startBenchServer({
  env: {
    LOG_LEVEL: 'error',
    TLS_CERT_FILE: tlsFiles.certFile,
    TLS_KEY_FILE: tlsFiles.keyFile,
    MQTTS_PORT: '0',
    MQTT_PORT: 'off',
  },
});
const rows: Array<{ mode: string; ours: Ramp; bare: Ramp }> = [];
try {
  const account = await server.createAccount({ quota: DEVICES + 10 });
  const agent = new Agent({ connect: { ca } });
  const model = await fetch(`${server.httpUrl}/api/v1/models`, {
    method: 'POST',
    headers: { ...account.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Luma-100' }),
    dispatcher: agent,
  });
  if (model.status !== 201) throw new Error(`model: ${model.status}`);
  const claimed = performance.now();
  const devices = await claimDevices({
    apiUrl: server.httpUrl,
    apiKey: account.apiKey,
    model: 'Luma-100',
    firmware: '1.0.0',
    serials: makeSerials('TLSB', DEVICES),
    certificates: true,
    ca,
  });
  console.log(
    `claimed ${devices.length} devices with a certificate each in ${((performance.now() - claimed) / 1000).toFixed(1)} s`,
  );
  const byPassword = devices.map(({ serial, username, password }) => ({ serial, username, password }));
  const ours = { url: server.mqttsUrl!, cpu: async () => cpuMicros(await server.cpu()) };
  const withPostgres = server.database === 'postgres';
  for (let round = smoke ? 1 : 0; round <= ROUNDS; round++) {
    for (const [mode, fleet] of [
      ['password', byPassword],
      ['certificate', devices],
    ] as const) {
      const bare = await bareAedes(tlsFiles.certFile, tlsFiles.keyFile);
      const bareRamp = await ramp(bare.url, fleet, ca, bare.cpu, false).finally(() => bare.stop());
      const oursRamp = await ramp(ours.url, fleet, ca, ours.cpu, withPostgres);
      // Let the disconnects settle before the next ramp.
      await new Promise((r) => setTimeout(r, 2000));
      if (round > 0) rows.push({ mode, ours: oursRamp, bare: bareRamp });
      console.log(
        `round ${round}, ${mode}: ours ${oursRamp.connected}/${DEVICES} in ${oursRamp.seconds.toFixed(1)} s, ${oursRamp.brokerUs.toFixed(0)} µs/connection` +
          (oursRamp.postgresUs !== undefined ? ` + PostgreSQL ${oursRamp.postgresUs.toFixed(0)} µs` : '') +
          `; bare Aedes ${bareRamp.connected}/${DEVICES}, ${bareRamp.brokerUs.toFixed(0)} µs/connection; ratio ${(oursRamp.brokerUs / bareRamp.brokerUs).toFixed(2)}`,
      );
    }
  }
} finally {
  await server.stop();
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const summary = (mode: string) => {
  const of = rows.filter((r) => r.mode === mode);
  const ours = median(of.map((r) => r.ours.brokerUs));
  const bare = median(of.map((r) => r.bare.brokerUs));
  const pgValues = of.map((r) => r.ours.postgresUs).filter((v): v is number => v !== undefined);
  const pg = pgValues.length ? median(pgValues) : undefined;
  return `${mode}: service ${ours.toFixed(0)} µs CPU per connection${pg !== undefined ? ` (+ PostgreSQL ${pg.toFixed(0)} µs)` : ''}, bare Aedes over TLS ${bare.toFixed(0)} µs: **ratio ${(ours / bare).toFixed(2)}** (service alone; runs: ${of.map((r) => (r.ours.brokerUs / r.bare.brokerUs).toFixed(2)).join(', ')})`;
};
const figures = [
  `database: ${server.database}; ${DEVICES} devices connecting over MQTTS at ${RATE}/s from one simulator process; medians of ${ROUNDS} rounds after a warm-up round`,
  summary('password'),
  summary('certificate'),
];
for (const f of figures) console.log(f);
if (!smoke && !dry) {
  recordResults({
    title: `MQTT connections over TLS: ${DEVICES} devices, password and client certificate (vs bare Aedes over TLS)`,
    command:
      'BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/connections-tls.bench.ts',
    figures,
    notes: [
      'Bare Aedes runs behind node:tls with the same certificate, TLS floor and client-certificate request as the service; the same devices (and certificates) connect to both.',
    ],
  });
}
