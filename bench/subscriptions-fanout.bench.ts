import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { createClient, type Client } from 'graphql-ws';
import { startBenchServer } from './lib/bench-server';
import { isSmoke, percentile, recordResults } from './lib/results';
import { makeSerials } from '#simulator/fleet';

/**
 * Subscription fan-out: SUBSCRIBERS graphql-ws clients watch `deviceChanged` while
 * DEVICES simulated devices (real MQTT connections, simulator engine, another process) flap:
 * FLAPS_PER_S random devices per second lose their connection without DISCONNECT (Last Will ->
 * offline) and come back 1 to 5 s later (online). Latency = subscriber receive time minus the
 * moment the device dropped or got its CONNACK (wall clock, same machine), for every delivered
 * change at every subscriber. Target: p99 < 1 s. `--smoke`: 100 devices, 5 subscribers, 3 s.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/subscriptions-fanout.bench.ts
 */
const smoke = isSmoke();
const DEVICES = smoke ? 100 : Number(process.env.FANOUT_DEVICES ?? 10_000);
const SUBSCRIBERS = smoke ? 5 : Number(process.env.FANOUT_SUBSCRIBERS ?? 200);
const FLAPS_PER_S = smoke ? 5 : Number(process.env.FANOUT_FLAPS_PER_S ?? 50);
const SECONDS = smoke ? 3 : Number(process.env.FANOUT_SECONDS ?? 30);
const CONNECT_RATE = Number(process.env.FANOUT_CONNECT_RATE ?? 300);
const here = path.dirname(fileURLToPath(import.meta.url));

const server = await startBenchServer({ env: { MAX_JSON_BODY_BYTES: String(4 * 1024 * 1024) } });
const fleet = fork(path.join(here, 'subscriptions-fanout.fleet.ts'), [], {
  execArgv: ['--import', 'tsx'],
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
const clients: Client[] = [];
try {
  const account = await server.createAccount({ quota: DEVICES });
  if (
    (
      await fetch(`${server.httpUrl}/api/v1/models`, {
        method: 'POST',
        headers: { ...account.headers, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'LX-200' }),
      })
    ).status !== 201
  )
    throw new Error('model');
  // Claimed without a firmware to install: this benchmark is about presence, not OTA.
  const creds = await claimWithoutFirmware(server.httpUrl, account.headers, makeSerials('FAN', DEVICES));

  /** serial -> [time, connected] transitions reported by the fleet process. */
  const transitions = new Map<string, Array<[number, 0 | 1]>>();
  const fleetMessages: Array<Record<string, unknown>> = [];
  fleet.on('message', (raw) => {
    const msg = raw as { transitions?: Array<[string, 0 | 1, number]> } & Record<string, unknown>;
    if (msg.transitions) {
      for (const [serial, connected, at] of msg.transitions) {
        let list = transitions.get(serial);
        if (!list) transitions.set(serial, (list = []));
        list.push([at, connected]);
      }
    } else fleetMessages.push(msg);
  });
  const waitFor = async (key: string) => {
    for (;;) {
      const found = fleetMessages.find((m) => key in m);
      if (found) return found;
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const connectStarted = performance.now();
  fleet.send({ cmd: 'start', brokerUrl: server.mqttUrl, devices: creds, connectRatePerS: CONNECT_RATE });
  const started = (await waitFor('started')) as { connected: number; failed: number };
  const connectSeconds = (performance.now() - connectStarted) / 1000;
  // The connection storm is not what is measured: wait until every connect is recorded as
  // online and the outbox is drained (at most 120 s).
  const settleDeadline = Date.now() + 120_000;
  for (;;) {
    const online = Number(
      ((await server.sql("SELECT count(*) AS n FROM devices WHERE connectivity = 'online'")).rows[0] as { n: string })
        .n,
    );
    const pending = Number(((await server.sql('SELECT count(*) AS n FROM events_pending')).rows[0] as { n: string }).n);
    if ((online >= started.connected && pending === 0) || Date.now() > settleDeadline) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const settledSeconds = (performance.now() - connectStarted) / 1000 - connectSeconds;

  // Subscribers: one WebSocket each, like 200 open portals.
  const received: Array<{ serial: string; type: string; at: number }> = [];
  let measuring = false;
  for (let i = 0; i < SUBSCRIBERS; i++) {
    const client = createClient({
      url: server.httpUrl.replace(/^http/, 'ws') + '/graphql',
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${account.apiKey}` },
      retryAttempts: 0,
      lazy: false,
      onNonLazyError: () => undefined,
    });
    clients.push(client);
    client.subscribe<{ deviceChanged: { type: string; device: { serial: string; status: string } } }>(
      { query: 'subscription { deviceChanged { type occurredAt device { serial status } } }' },
      {
        next: (value) => {
          const at = Date.now();
          const change = value.data?.deviceChanged;
          if (measuring && change) received.push({ serial: change.device.serial, type: change.type, at });
        },
        error: () => undefined,
        complete: () => undefined,
      },
    );
  }
  await new Promise((r) => setTimeout(r, 2000));

  measuring = true;
  const flapStarted = Date.now();
  fleet.send({ cmd: 'flap', flapsPerSecond: FLAPS_PER_S, seconds: SECONDS });
  const { flapped } = (await waitFor('flapped')) as { flapped: number };
  await new Promise((r) => setTimeout(r, 7000)); // reconnects (1-5 s) and their deliveries
  measuring = false;

  // Latency of each delivery: from the latest transition of that device to the delivered state.
  const latencies: number[] = [];
  let unmatched = 0;
  for (const r of received) {
    const want = r.type === 'device.offline' ? 0 : r.type === 'device.online' ? 1 : -1;
    if (want < 0) continue;
    const list = transitions.get(r.serial) ?? [];
    let source: number | undefined;
    for (const [at, connected] of list) if (connected === want && at <= r.at && at >= flapStarted) source = at;
    if (source === undefined) unmatched += 1;
    else latencies.push(r.at - source);
  }
  latencies.sort((a, b) => a - b);
  const deliveredPerSubscriber = latencies.length / SUBSCRIBERS;
  const figures = [
    `database: ${server.database}; ${DEVICES.toLocaleString('en')} simulated devices (real MQTT over TCP, simulator engine in a separate process) connected in ${connectSeconds.toFixed(1)} s at ${CONNECT_RATE}/s (${started.connected} connected, ${started.failed} failed; presence settled ${settledSeconds.toFixed(1)} s later)`,
    `${SUBSCRIBERS} graphql-ws subscribers on deviceChanged (one WebSocket each); ${flapped} flaps in ${SECONDS} s (${FLAPS_PER_S}/s: Last Will offline, reconnect 1-5 s later)`,
    `${latencies.length.toLocaleString('en')} deliveries timed (${Math.round(deliveredPerSubscriber)} per subscriber, ${unmatched} without a matching MQTT transition): ` +
      `p50 **${percentile(latencies, 50)} ms**, p90 ${percentile(latencies, 90)} ms, **p99 ${percentile(latencies, 99)} ms**, max ${latencies.at(-1)} ms (target p99 < 1,000 ms)`,
  ];
  for (const f of figures) console.log(f);
  if (!smoke) {
    recordResults({
      title: `Subscription fan-out: ${SUBSCRIBERS} subscribers, ${DEVICES.toLocaleString('en')} flapping devices`,
      command: `${process.env.BENCH_DATABASE_URL ? 'BENCH_DATABASE_URL=... ' : ''}node --import tsx bench/subscriptions-fanout.bench.ts`,
      figures,
      notes: [
        'Each subscriber runs the same document: the selection is executed once per change for all of them (api/src/graphql/live/shared-execution.ts); every subscriber still gets its own WebSocket message.',
        'Offline latency includes the broker noticing the dropped socket and firing the Last Will; online latency starts at the CONNACK. Path: broker -> batched presence write (one UPDATE per flush) -> outbox -> dispatcher -> event bus -> live view (one batched re-read per account per 25 ms) -> every subscriber.',
      ],
    });
  }
} finally {
  for (const c of clients) await Promise.resolve(c.dispose()).catch(() => undefined);
  fleet.send({ cmd: 'stop' });
  await new Promise((r) => {
    fleet.once('exit', r);
    setTimeout(r, 15_000).unref();
  });
  if (fleet.exitCode === null) fleet.kill('SIGKILL');
  await server.stop();
}

async function claimWithoutFirmware(apiUrl: string, headers: Record<string, string>, serials: string[]) {
  const out: Array<{ serial: string; username: string; password: string }> = [];
  for (let i = 0; i < serials.length; i += 1000) {
    const res = await fetch(`${apiUrl}/api/v1/devices/claim`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ serials: serials.slice(i, i + 1000), model: 'LX-200' }),
    });
    if (res.status !== 201) throw new Error(`claim: ${res.status} ${(await res.text()).slice(0, 200)}`);
    const body = (await res.json()) as {
      devices: Array<{ serial: string; credentials: { username: string; password: string } }>;
    };
    out.push(...body.devices.map((d) => ({ serial: d.serial, ...d.credentials })));
  }
  return out;
}
