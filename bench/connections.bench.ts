import fs from 'node:fs';
import { Agent, fetch } from 'undici';
import { startBenchServer, type BenchServer } from './lib/bench-server';
import { startBareAedes } from './lib/bare-aedes';
import { startFleetProcess } from './lib/fleet-process';
import { isSmoke, recordResults, type CurrentFigure } from './lib/results';
import { claimDevices, makeSerials, type DeviceCredentials } from '#simulator/fleet';
import { makeTlsFiles } from '#test/helpers/tls';

/**
 * What a device connection costs the service, against bare Aedes 1.2 under the same client in
 * the same run:
 *  1. ramps of N simulated devices (the simulator engine, in a process of its own) connecting
 *     with clean=false: plain MQTT with passwords (authentication, session and presence), MQTT
 *     over TLS with passwords, and over TLS with client certificates of the service's device CA.
 *     The figure is CPU per connection of the broker's process (plus, for ours, the PostgreSQL
 *     backends of its database) and its ratio to bare Aedes on the same transport.
 *     Target (plain): at most 1.15x bare Aedes.
 *  2. a reconnect storm: S devices connected, the broker stopped and started again after the
 *     same outage for both; the time from the new process listening until every device is back
 *     (ours: also online in the database). Target: at most 1.2x bare Aedes.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/connections.bench.ts
 *   options: --dry (print, record nothing) --devices N (ramps, default 2000) --rounds R (default 3,
 *   after one warm-up round: the first connections pay for JIT compilation) --storm S (default
 *   10000; 0 skips it) --profile DIR (a CPU profile of ours per ramp mode; records nothing)
 */
const smoke = isSmoke();
const profileDir = process.argv.includes('--profile') ? process.argv[process.argv.indexOf('--profile') + 1] : undefined;
const dry = process.argv.includes('--dry') || profileDir !== undefined;
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DEVICES = smoke ? 20 : arg('devices', 2000);
const ROUNDS = smoke ? 1 : arg('rounds', 3);
const STORM = smoke ? 40 : arg('storm', 10_000);
const RATE = 500;
/** Both brokers stay down this long in the storm: every device has been refused once and waits. */
const OUTAGE_MS = smoke ? 3000 : 12_000;
const TARGET_RAMP = 1.15;
const TARGET_STORM = 1.2;

type Mode = 'plain' | 'tls-password' | 'tls-certificate';
interface Ramp {
  connected: number;
  /** Broker process CPU per connection (µs). */
  brokerUs: number;
  /** PostgreSQL backends' CPU per connection (µs), ours only. */
  postgresUs: number;
  /** Transactions committed per connection (a statement outside a transaction is one), ours only. */
  transactions: number;
}

/** Connects `devices` to `url` at RATE/s and disconnects them; CPU per connection of the broker (and PostgreSQL). */
async function ramp(input: {
  url: string;
  devices: DeviceCredentials[];
  ca?: string;
  cpu: () => Promise<number>;
  server?: BenchServer;
  profile?: string;
}): Promise<Ramp> {
  const fleet = startFleetProcess({
    devices: input.devices,
    brokerUrl: input.url,
    ...(input.ca ? { ca: input.ca } : {}),
    firmware: '1.0.0',
    heartbeatS: 600,
    connectRatePerS: RATE,
    maxPendingConnects: 200,
  });
  const meter = await input.server?.postgresCpu();
  try {
    await meter?.start();
    if (input.profile) await input.server?.startProfile();
    const cpu0 = await input.cpu();
    const result = await fleet.start();
    // Presence writes of the last connections land with the next flush (at most 1 s later).
    await new Promise((r) => setTimeout(r, 1200));
    const cpu1 = await input.cpu();
    if (input.profile) await input.server?.stopProfile(input.profile);
    const postgres = (await meter?.stop()) ?? 0;
    const n = Math.max(1, result.connected);
    return {
      connected: result.connected,
      brokerUs: (cpu1 - cpu0) / n,
      postgresUs: postgres / n,
      transactions: (meter?.transactions ?? 0) / n,
    };
  } finally {
    await meter?.close();
    await fleet.stop();
  }
}

/** Polls until `done` or `limitMs`; resolves with the milliseconds from `sinceMs` (epoch) to done. */
async function until(done: () => Promise<boolean>, sinceMs: number, limitMs = 180_000): Promise<number> {
  for (;;) {
    if (await done()) return performance.timeOrigin + performance.now() - sinceMs;
    if (performance.timeOrigin + performance.now() - sinceMs > limitMs) throw new Error('storm did not settle');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const tlsFiles = makeTlsFiles();
const ca = fs.readFileSync(tlsFiles.caFile, 'utf8');
const tls = { certFile: tlsFiles.certFile, keyFile: tlsFiles.keyFile };
const server = await startBenchServer({
  env: { LOG_LEVEL: 'error', TLS_CERT_FILE: tls.certFile, TLS_KEY_FILE: tls.keyFile, MQTTS_PORT: '0' },
});
const rows: Array<{ mode: Mode; ours: Ramp; bare: Ramp }> = [];
let storm: { ours: number; bare: number; devices: number } | undefined;
try {
  const account = await server.createAccount({ quota: DEVICES + STORM + 10 });
  const agent = new Agent({ connect: { ca } });
  const model = await fetch(`${server.httpUrl}/api/v1/models`, {
    method: 'POST',
    headers: { ...account.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Luma-100' }),
    dispatcher: agent,
  });
  if (model.status !== 201) throw new Error(`model: ${model.status}`);
  const claim = (prefix: string, count: number, certificates: boolean) =>
    claimDevices({
      apiUrl: server.httpUrl,
      apiKey: account.apiKey,
      model: 'Luma-100',
      firmware: '1.0.0',
      serials: makeSerials(prefix, count),
      certificates,
      ca,
    });
  const devices = await claim('CONN', DEVICES, true);
  const byPassword = devices.map(({ serial, username, password }) => ({ serial, username, password }));
  const oursCpu = async () => {
    const c = await server.cpu();
    return c.user + c.system;
  };

  for (let round = smoke ? 1 : 0; round <= ROUNDS; round++) {
    for (const mode of ['plain', 'tls-password', 'tls-certificate'] as const) {
      const fleet = mode === 'tls-certificate' ? devices : byPassword;
      const onTls = mode !== 'plain';
      const bare = await startBareAedes(onTls ? { tls } : {});
      const bareRamp = await ramp({ url: bare.url, devices: fleet, ...(onTls ? { ca } : {}), cpu: bare.cpu }).finally(
        () => bare.stop(),
      );
      const oursRamp = await ramp({
        url: onTls ? server.mqttsUrl! : server.mqttUrl,
        devices: fleet,
        ...(onTls ? { ca } : {}),
        cpu: oursCpu,
        server,
        ...(profileDir && round === ROUNDS ? { profile: `${profileDir}/connections-${mode}.cpuprofile` } : {}),
      });
      // Let the disconnects settle before the next ramp.
      await new Promise((r) => setTimeout(r, 2000));
      if (round > 0) rows.push({ mode, ours: oursRamp, bare: bareRamp });
      console.log(
        `round ${round}, ${mode}: ours ${oursRamp.connected}/${DEVICES}, ${oursRamp.brokerUs.toFixed(0)} µs + PostgreSQL ${oursRamp.postgresUs.toFixed(0)} µs per connection (${oursRamp.transactions.toFixed(2)} transactions); ` +
          `bare Aedes ${bareRamp.connected}/${DEVICES}, ${bareRamp.brokerUs.toFixed(0)} µs; ratio ${(oursRamp.brokerUs / bareRamp.brokerUs).toFixed(2)}`,
      );
    }
  }

  if (STORM > 0) {
    const stormDevices = (await claim('STORM', STORM, false)).map(({ serial, username, password }) => ({
      serial,
      username,
      password,
    }));
    const connectAll = async (url: string) => {
      const fleet = startFleetProcess({
        devices: stormDevices,
        brokerUrl: url,
        firmware: '1.0.0',
        heartbeatS: 600,
        connectRatePerS: 2000,
        maxPendingConnects: 1000,
      });
      const started = await fleet.start();
      if (started.connected !== STORM) throw new Error(`storm: only ${started.connected} of ${STORM} connected`);
      return fleet;
    };
    const allBack = (fleet: ReturnType<typeof startFleetProcess>) => async () =>
      (await fleet.stats()).connected === STORM;

    const bare = await startBareAedes();
    const bareFleet = await connectAll(bare.url);
    const stoppedAt = performance.now();
    await bare.stop();
    await new Promise((r) => setTimeout(r, OUTAGE_MS - (performance.now() - stoppedAt)));
    const bareAgain = await startBareAedes({ port: bare.port });
    const bareMs = await until(allBack(bareFleet), performance.timeOrigin + performance.now());
    await bareFleet.stop();
    await bareAgain.stop();

    const oursFleet = await connectAll(server.mqttUrl);
    const online = async () => {
      const { rows } = await server.sql(
        "SELECT count(*)::int AS n FROM devices WHERE serial LIKE 'STORM-%' AND connectivity = 'online'",
      );
      return (rows as Array<{ n: number }>)[0]!.n;
    };
    await until(async () => (await online()) === STORM, performance.timeOrigin + performance.now());
    const { readyAtMs } = await server.restart({ downMs: OUTAGE_MS });
    const oursMs = await until(async () => (await allBack(oursFleet)()) && (await online()) === STORM, readyAtMs);
    await oursFleet.stop();
    storm = { ours: oursMs, bare: bareMs, devices: STORM };
    console.log(`storm of ${STORM}: ours ${(oursMs / 1000).toFixed(1)} s, bare Aedes ${(bareMs / 1000).toFixed(1)} s`);
  }
} finally {
  await server.stop();
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const LABEL: Record<Mode, string> = {
  plain: 'plain MQTT, password',
  'tls-password': 'MQTT over TLS, password',
  'tls-certificate': 'MQTT over TLS, client certificate',
};
const figures: string[] = [
  `database: ${server.database}; ${DEVICES} devices (clean=false) connecting at ${RATE}/s from one simulator process; medians of ${ROUNDS} rounds after a warm-up round; CPU from /proc and process.cpuUsage`,
];
const current: CurrentFigure[] = [];
for (const mode of ['plain', 'tls-password', 'tls-certificate'] as const) {
  const of = rows.filter((r) => r.mode === mode);
  if (of.length === 0) continue;
  const ours = median(of.map((r) => r.ours.brokerUs));
  const pg = median(of.map((r) => r.ours.postgresUs));
  const bare = median(of.map((r) => r.bare.brokerUs));
  const ratio = ours / bare;
  figures.push(
    `${LABEL[mode]}: service **${ours.toFixed(0)} µs** CPU per connection (+ PostgreSQL ${pg.toFixed(0)} µs), bare Aedes ${bare.toFixed(0)} µs: **ratio ${ratio.toFixed(2)}** (service alone; with PostgreSQL ${((ours + pg) / bare).toFixed(2)}; runs: ${of.map((r) => (r.ours.brokerUs / r.bare.brokerUs).toFixed(2)).join(', ')})`,
  );
  current.push({
    id: `Connection, ${LABEL[mode]} (CPU vs bare Aedes)`,
    figure: `${ours.toFixed(0)} µs service (+ ${pg.toFixed(0)} µs PostgreSQL), ratio ${ratio.toFixed(2)}`,
    target: mode === 'plain' ? `<= ${TARGET_RAMP}x bare Aedes` : 'none (the TLS handshake dominates)',
    met: mode === 'plain' ? ratio <= TARGET_RAMP : null,
  });
}
if (storm) {
  const ratio = storm.ours / storm.bare;
  figures.push(
    `reconnect storm: ${storm.devices.toLocaleString('en')} devices, both brokers down ${OUTAGE_MS / 1000} s (devices retry 2-10 s after a refusal): every device back ${(storm.ours / 1000).toFixed(1)} s after ours listened again (and online in the database), ${(storm.bare / 1000).toFixed(1)} s for bare Aedes: **ratio ${ratio.toFixed(2)}**`,
  );
  current.push({
    id: `Reconnect storm, ${storm.devices.toLocaleString('en')} devices (time vs bare Aedes)`,
    figure: `${(storm.ours / 1000).toFixed(1)} s, ratio ${ratio.toFixed(2)}`,
    target: `<= ${TARGET_STORM}x bare Aedes`,
    met: ratio <= TARGET_STORM,
  });
}
for (const f of figures) console.log(f);
if (!smoke && !dry) {
  recordResults({
    title: `MQTT connections: ${DEVICES} devices plain and over TLS, and a storm of ${STORM} (vs bare Aedes)`,
    command: 'BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/connections.bench.ts',
    figures,
    notes: [
      'Bare Aedes (bench/bare-aedes.server.ts) runs in a process of its own, plain or behind node:tls with the same certificate, TLS floor and client-certificate request as the service; the same devices (and certificates) connect to both.',
    ],
    current,
  });
}
