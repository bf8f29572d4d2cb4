import { randomBytes } from 'node:crypto';
import { startBenchServer, type BenchAccount, type BenchServer } from './lib/bench-server';
import { isSmoke, recordResults } from './lib/results';
import { claimDevices, makeSerials } from '#simulator/fleet';
import { startFleetProcess } from './lib/fleet-process';
import { startBareAedes } from './lib/bare-aedes';
import { serviceCpuMeter } from './lib/service-cpu';

/**
 * OTA benchmark, the server and the simulated fleet each in a child process:
 *  1. scheduling: POST /firmware/deploy to 100,000 claimed devices (time to create it: one
 *     set-based INSERT ... SELECT of every target, history rows included), then the CPU of a view
 *     of that deployment (GET /firmware/deployments/:id) while it runs and once it finished;
 *  2. delivery to 10,000 online simulated devices, twice: first with the devices holding their
 *     downloads until every command arrived (the service's publishing rate: commands per second
 *     between the first and the last arrival), then with fast downloads started at once (the
 *     same rate while the fleet's downloads and reports share the cores, and the time until
 *     every update succeeded, boot-confirmed by the heartbeat on the new version);
 *  3. download throughput: a 4 MB image to 500 of those devices at once: bytes served per second
 *     (fleet_firmware_download_bytes_total over the time until all succeeded);
 *  4. the baseline: bare Aedes 1.2 publishing one command of the same shape (QoS 1) to each of the
 *     same number of simulated devices, holding their downloads as in 2a: its CPU per command is
 *     the floor of the MQTT delivery alone, and the held delivery's service CPU is compared to it.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/ota.bench.ts
 *   options: --smoke (tiny, records nothing) --dry (print only) --schedule N (default 100000) --devices N (default 10000) --download-devices N (default 500) --fleet-processes N (default 1)
 *   --filler N (N more devices inserted by SQL, never online: a large table in a short run)
 *   --held-only (stop after the held delivery's CPU per command; records nothing)
 *   --profile FILE (a CPU profile of the server during the held delivery, written to FILE, a .cpuprofile; the run
 *   stops after that phase and records nothing: profiling costs CPU)
 */
const smoke = isSmoke();
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SCHEDULE = smoke ? 1000 : arg('schedule', 100_000);
const DEVICES = smoke ? 50 : arg('devices', 10_000);
/** `--filler N`: N more devices inserted by SQL (not claimed, never online), for a table of the recorded run's size. */
const FILLER = smoke ? 0 : arg('filler', 0);
const DOWNLOADERS = Math.min(DEVICES, smoke ? 20 : arg('download-devices', 500));
// Each simulated device holds an MQTT socket and, while it downloads, an HTTP one, so one process
// of 10,000 devices nears its limit of 20,000 file descriptors; `--fleet-processes` splits the
// fleet. One by default: two processes on the 2 shared cores doubled the storm and made every
// figure worse (2,350 of 10,000 updates failed in one such run).
const FLEET_PROCESSES = smoke ? 1 : arg('fleet-processes', 1);
/** Stops after the held delivery's CPU per command (no downloads, nothing recorded): quick before/after comparisons. */
const heldOnly = process.argv.includes('--held-only');
const profileFile = process.argv.includes('--profile')
  ? process.argv[process.argv.indexOf('--profile') + 1]
  : undefined;

async function upload(
  server: BenchServer,
  account: BenchAccount,
  model: string,
  version: string,
  bytes: Buffer,
): Promise<void> {
  const form = new FormData();
  form.append('model', model);
  form.append('version', version);
  form.append('file', new Blob([new Uint8Array(bytes)]), 'fw.bin');
  const res = await fetch(`${server.httpUrl}/api/v1/firmware/versions`, {
    method: 'POST',
    headers: account.headers,
    body: form,
  });
  if (res.status !== 201) throw new Error(`upload ${model} ${version}: HTTP ${res.status} ${await res.text()}`);
}

async function api(
  server: BenchServer,
  account: BenchAccount,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(server.httpUrl + path, {
        method,
        headers: { ...account.headers, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: await res.json() };
    } catch (err) {
      // A reused keep-alive socket the server closed meanwhile ("other side closed"): polls are
      // idempotent reads, so ask again; anything else after three tries is real.
      if (method !== 'GET' || attempt >= 3) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function metric(server: BenchServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.httpUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface ViewCost {
  /** CPU per view, service and PostgreSQL (or the embedded database's thread inside the service), ms. */
  totalMs: number;
  databaseMs: number | undefined;
  medianMs: number;
}

/** CPU and latency of `views` GETs of one deployment, one after the other (after one unmeasured). */
async function viewCost(server: BenchServer, account: BenchAccount, id: string, views = 10): Promise<ViewCost> {
  const path = `/api/v1/firmware/deployments/${id}`;
  await api(server, account, 'GET', path);
  const meter = await serviceCpuMeter(server);
  const took: number[] = [];
  try {
    await meter.start();
    for (let i = 0; i < views; i++) {
      const t0 = performance.now();
      const res = await api(server, account, 'GET', path);
      if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}`);
      took.push(performance.now() - t0);
    }
    const used = await meter.stop();
    took.sort((a, b) => a - b);
    return {
      totalMs: used.totalUs / views / 1000,
      databaseMs: used.databaseUs === undefined ? undefined : used.databaseUs / views / 1000,
      medianMs: took[Math.floor(views / 2)]!,
    };
  } finally {
    await meter.close();
  }
}

const describeView = (v: ViewCost) =>
  `${v.totalMs.toFixed(1)} ms CPU per view${v.databaseMs === undefined ? '' : ` (database ${v.databaseMs.toFixed(1)})`}, median ${v.medianMs.toFixed(1)} ms`;

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string, everyMs = 100): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

interface Counts {
  succeeded: number;
  failed: number;
  timed_out: number;
}

/** POST /api/v1/firmware/deploy: the status and the answer (202: the deployment created). */
async function deploy(
  server: BenchServer,
  account: BenchAccount,
  body: unknown,
): Promise<{ status: number; body: { deployment_id: string; target_count: number } }> {
  const res = await api(server, account, 'POST', '/api/v1/firmware/deploy', body);
  return { status: res.status, body: res.body as { deployment_id: string; target_count: number } };
}

async function counts(server: BenchServer, account: BenchAccount, id: string): Promise<Counts> {
  const res = await api(server, account, 'GET', `/api/v1/firmware/deployments/${id}`);
  // Under load the service may answer 503 for a moment (database health probe): ask again.
  return res.status === 200
    ? (res.body as { deployment: { counts: Counts } }).deployment.counts
    : { succeeded: 0, failed: 0, timed_out: 0 };
}

const figures: string[] = [];
/** CPU per command of the held delivery (µs): the service's own sending cost, for the table of current figures. */
const heldCosts: Array<{ server: number; postgres: number | undefined; fleet: number }> = [];
const viewCosts: Array<{ running: ViewCost; finished: ViewCost }> = [];
/** Bare Aedes CPU per QoS 1 command of the same shape (phase 4), µs. */
const bareCommandUs: number[] = [];
const report = (line: string) => {
  figures.push(line);
  console.log(line);
};
const server = await startBenchServer({ env: { OTA_SWEEP_INTERVAL_MS: '2000' } });
try {
  const account = await server.createAccount();
  for (const model of ['SCHED', 'LIVE']) await api(server, account, 'POST', '/api/v1/models', { name: model });
  await upload(server, account, 'SCHED', '2.0.0', randomBytes(64 * 1024));

  // 1. Scheduling 100,000 targets.
  const schedSerials = makeSerials('SCH', SCHEDULE);
  await claimDevices({
    apiUrl: server.httpUrl,
    apiKey: account.apiKey,
    model: 'SCHED',
    firmware: '2.0.0',
    serials: schedSerials,
  });
  // The claims scheduled 2.0.0 already (claim deployments); cancel them so the deploy below targets everything anew.
  const listed = await api(server, account, 'GET', '/api/v1/firmware/deployments?limit=100');
  const claimDeps = (listed.body as { deployments: Array<{ id: string; kind: string }> }).deployments;
  for (const d of claimDeps) await api(server, account, 'POST', `/api/v1/firmware/deployments/${d.id}/cancel`);
  // What autovacuum does after 100,000 cancelled rows and as many new devices (it is off on these
  // machines): without it the deploy below probes 100,000 dead index entries and plans on empty statistics.
  if (server.database === 'postgres') await server.sql('VACUUM ANALYZE devices, device_updates, device_events');
  await upload(server, account, 'SCHED', '2.1.0', randomBytes(64 * 1024));
  let t0 = performance.now();
  const sched = await deploy(server, account, {
    firmware_version: '2.1.0',
    filter: { model: 'SCHED' },
    rollout: { batches: [1, 10, 50, 100], failure_threshold_percent: 5 },
  });
  const scheduleMs = performance.now() - t0;
  if (sched.status !== 202 || sched.body.target_count !== SCHEDULE)
    throw new Error(`deploy to ${SCHEDULE}: ${sched.status} ${JSON.stringify(sched.body)}`);
  report(
    `scheduling: deployment to ${SCHEDULE.toLocaleString('en')} devices created in ${scheduleMs.toFixed(0)} ms (202 answer, targets and history rows written; target < 3000 ms; tables vacuumed and analyzed before, as autovacuum would)`,
  );
  // Watching it: its view counts over every update while it runs; once finished (here cancelled,
  // its updates with it) the view shows the figures kept when it finished.
  const schedId = sched.body.deployment_id;
  const runningView = await viewCost(server, account, schedId);
  await api(server, account, 'POST', `/api/v1/firmware/deployments/${schedId}/cancel`);
  const finishedView = await viewCost(server, account, schedId);
  viewCosts.push({ running: runningView, finished: finishedView });
  report(
    `deployment view (GET /firmware/deployments/:id) at ${SCHEDULE.toLocaleString('en')} targets: running ${describeView(runningView)}; finished ${describeView(finishedView)}`,
  );

  // Devices of the table that take no part (the recorded run's 100,000 scheduled ones) without
  // claiming them: the dispatch's statements then meet a table of that size in a short run.
  if (FILLER > 0)
    await server.sql(
      `INSERT INTO devices (id, account_id, serial, name, model_id)
       SELECT gen_random_uuid(), ?, 'FILL-' || lpad(i::text, 7, '0'), 'FILL-' || lpad(i::text, 7, '0'), (SELECT id FROM models WHERE account_id = ? AND name = 'SCHED')
         FROM generate_series(1, ?) i`,
      [account.accountId, account.accountId, FILLER],
    );

  // 2. 10,000 online devices updated end to end.
  await upload(server, account, 'LIVE', '1.0.0', randomBytes(16 * 1024));
  await upload(server, account, 'LIVE', '1.1.0', randomBytes(64 * 1024));
  const creds = await claimDevices({
    apiUrl: server.httpUrl,
    apiKey: account.apiKey,
    model: 'LIVE',
    firmware: '1.0.0',
    serials: makeSerials('LIVE', DEVICES),
  });
  const fleets = Array.from({ length: FLEET_PROCESSES }, (_, i) =>
    startFleetProcess({
      devices: creds.filter((_, j) => j % FLEET_PROCESSES === i),
      brokerUrl: server.mqttUrl,
      firmware: '1.0.0',
      heartbeatS: 30,
      rebootMs: 200,
      downloadKbps: 0,
      connectRatePerS: 2000 / FLEET_PROCESSES,
    }),
  );
  const fleet = {
    stats: async () => {
      const all = await Promise.all(fleets.map((f) => f.stats()));
      return {
        connected: all.reduce((n, s) => n + s.connected, 0),
        commandsReceived: all.reduce((n, s) => n + s.commandsReceived, 0),
        lastCommandAtMs: {
          first: Math.min(...all.map((s) => s.lastCommandAtMs.first || Infinity)),
          last: Math.max(...all.map((s) => s.lastCommandAtMs.last)),
        },
        cpu: { user: all.reduce((n, s) => n + s.cpu.user, 0), system: all.reduce((n, s) => n + s.cpu.system, 0) },
      };
    },
    stop: () => Promise.all(fleets.map((f) => f.stop())),
  };
  const starts = await Promise.all(fleets.map((f) => f.start()));
  const started = {
    connected: starts.reduce((n, r) => n + r.connected, 0),
    failed: starts.reduce((n, r) => n + r.failed, 0),
    seconds: Math.max(...starts.map((r) => r.seconds)),
  };
  report(
    `fleet: ${started.connected.toLocaleString('en')} simulated devices in ${FLEET_PROCESSES} processes connected in ${started.seconds.toFixed(1)} s (${started.failed} failed)`,
  );
  // Claimed with 1.0.0, which they run: every claim update completes as already installed.
  const onlineOnOld = async () =>
    (
      (
        await server.sql(
          `SELECT count(*)::int AS n FROM devices d JOIN models m ON m.id = d.model_id WHERE m.name = 'LIVE' AND d.firmware = '1.0.0' AND d.connectivity = 'online'`,
        )
      ).rows[0] as { n: number }
    ).n;
  await waitUntil(
    async () => {
      const n = await onlineOnOld();
      if (n !== DEVICES) console.log(`waiting: ${n}/${DEVICES} devices online on 1.0.0`);
      return n === DEVICES;
    },
    120_000,
    'every device online on 1.0.0',
    1000,
  );
  await sleep(1000);

  /**
   * One deployment of `version` to the whole live fleet: when each command reached its device
   * (the devices' own clocks, same machine), when the broker had taken them all, the CPU each
   * side spent meanwhile, and when every update succeeded. With `held` the devices accept their
   * commands but start no download until every command arrived: the service's publishing rate
   * alone, without the fleet's 10,000 downloads and progress reports taking the same two cores.
   */
  async function deliver(version: string, held: boolean) {
    if (held) await Promise.all(fleets.map((f) => f.holdDownloads()));
    // What autovacuum would have done after the previous phase's updates (it is off here).
    if (server.database === 'postgres')
      await server.sql('VACUUM ANALYZE devices, device_updates, device_events, events');
    // What the connected fleet costs with no command (heartbeats, sweeps), per second: a held
    // delivery's window holds seconds of it, more the slower the delivery, so it is also given net.
    const quiet = await server.postgresCpu();
    await quiet?.start();
    const quiet0 = { server: await server.cpu(), at: performance.now() };
    await sleep(3000);
    const quietServer = await server.cpu();
    const quietSeconds = (performance.now() - quiet0.at) / 1000;
    const quietPostgres = (await quiet?.stop()) ?? 0;
    await quiet?.close();
    const idlePerSecond = {
      server: (quietServer.user + quietServer.system - quiet0.server.user - quiet0.server.system) / quietSeconds,
      postgres: quietPostgres / quietSeconds,
    };
    const published0 = await metric(server, 'fleet_ota_commands_published_total');
    const received0 = (await fleet.stats()).commandsReceived;
    const deployAtMs = Date.now();
    const t0 = performance.now();
    const dep = await deploy(server, account, { firmware_version: version, filter: { model: 'LIVE' } });
    const createMs = performance.now() - t0;
    // The cost of sending, apart from creating the deployment: CPU from the 202 answer on.
    const meter = await server.postgresCpu();
    await meter?.start();
    if (held && profileFile) await server.startProfile();
    const cpu0 = { server: await server.cpu(), fleet: (await fleet.stats()).cpu, at: performance.now() };
    if (dep.status !== 202 || dep.body.target_count !== DEVICES)
      throw new Error(`deploy ${version} to live fleet: ${dep.status} ${JSON.stringify(dep.body)}`);
    let publishedAllMs = 0;
    await waitUntil(
      async () => {
        if (!publishedAllMs && (await metric(server, 'fleet_ota_commands_published_total')) - published0 >= DEVICES)
          publishedAllMs = performance.now() - t0;
        return Boolean(publishedAllMs);
      },
      120_000,
      'every command published',
      100,
    );
    // extract() gives numeric, which node-postgres hands over as a string (null without rows).
    const spread = (
      await server.sql(
        `SELECT extract(epoch FROM max(sent_at) - min(sent_at)) * 1000 AS ms FROM device_updates WHERE deployment_id = ?`,
        [dep.body.deployment_id],
      )
    ).rows[0] as { ms: string | number | null };
    console.log(
      `${version}${held ? ' (downloads held)' : ''}: sent_at spread ${Number(spread.ms).toFixed(0)} ms; published after ${publishedAllMs.toFixed(0)} ms`,
    );
    await waitUntil(
      async () => (await fleet.stats()).commandsReceived - received0 >= DEVICES,
      60_000,
      'every command delivered',
      50,
    );
    const stats1 = await fleet.stats();
    const delivered = stats1.lastCommandAtMs;
    // CPU each side spent from the 202 answer until every command arrived, per command (µs).
    const cpu1 = { server: await server.cpu(), fleet: stats1.cpu, at: performance.now() };
    if (held && profileFile) await server.stopProfile(profileFile);
    const postgresMicros = await meter?.stop();
    await meter?.close();
    const used = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage) => (b.user + b.system - a.user - a.system) / DEVICES;
    const cpuPerCommand = {
      server: used(cpu0.server, cpu1.server),
      fleet: used(cpu0.fleet, cpu1.fleet),
      // The backends of the server's own database (pg_stat_activity), not every postgres process.
      postgres: postgresMicros === undefined ? undefined : postgresMicros / DEVICES,
    };
    const firstMs = delivered.first - deployAtMs;
    const lastMs = delivered.last - deployAtMs;
    // The rate between the first and the last arrival is the publishing rate; the wait before
    // the first is creating the deployment and committing its first `sent` rows.
    const rate = Math.round((DEVICES - 1) / Math.max(0.001, (lastMs - firstMs) / 1000));
    const delivery = {
      createMs,
      firstMs,
      lastMs,
      rate,
      fromRequest: Math.round(DEVICES / (publishedAllMs / 1000)),
      publishedAllMs,
      cpuPerCommand,
    };
    // At once: the held delivery's figure is known here, long before every download finished.
    const windowSeconds = (cpu1.at - cpu0.at) / 1000;
    const net = (perCommand: number, perSecond: number) => perCommand - (perSecond * windowSeconds) / DEVICES;
    console.log(
      `${version}: CPU per command: server ${cpuPerCommand.server.toFixed(0)} µs, PostgreSQL ${cpuPerCommand.postgres?.toFixed(0) ?? 'n/a'} µs, fleet ${cpuPerCommand.fleet.toFixed(0)} µs; ` +
        `net of the quiet fleet's cost (server ${(idlePerSecond.server / 1000).toFixed(0)} ms/s, PostgreSQL ${(idlePerSecond.postgres / 1000).toFixed(0)} ms/s over ${windowSeconds.toFixed(1)} s): ` +
        `server ${net(cpuPerCommand.server, idlePerSecond.server).toFixed(0)} µs, PostgreSQL ${cpuPerCommand.postgres === undefined ? 'n/a' : net(cpuPerCommand.postgres, idlePerSecond.postgres).toFixed(0)} µs`,
    );
    if (held && heldOnly) return { delivery, allMs: 0, counts: { succeeded: 0, failed: 0, timed_out: 0 } };
    // Spread, 1,000 downloads starting per second: all 10,000 at one instant exhaust the file
    // descriptors of both processes (20,000 each here, and each side already holds 10,000 MQTT
    // sockets); refused and hung downloads then wait out 30 s timeouts and retries.
    if (held) await Promise.all(fleets.map((f) => f.releaseDownloads(DEVICES)));
    // Where the time goes: every 5 s the states, and the CPU each side took (share of one core).
    let tick = { at: performance.now(), server: await server.cpu(), fleet: (await fleet.stats()).cpu };
    let ticking = false;
    const ticker = setInterval(() => {
      // A poll the loaded server answers late must not overlap the next (its CPU shares would mix).
      if (ticking) return;
      ticking = true;
      void (async () => {
        // CPU first, with its own clock reading: the counts poll may wait seconds for an answer.
        const [cpu, stats] = await Promise.all([server.cpu(), fleet.stats()]);
        const now = performance.now();
        const c = await counts(server, account, dep.body.deployment_id);
        const share = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage) =>
          `${(((b.user + b.system - a.user - a.system) / 1000 / (now - tick.at)) * 100).toFixed(0)}%`;
        const states = Object.entries(c)
          .filter(([, n]) => Number(n) > 0)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ');
        console.log(
          `  +${((now - t0) / 1000).toFixed(0)} s: ${states}; server CPU ${share(tick.server, cpu)}, fleet CPU ${share(tick.fleet, stats.cpu)}, fleet connected ${stats.connected}`,
        );
        tick = { at: now, server: cpu, fleet: stats.cpu };
      })()
        .catch(() => undefined)
        .finally(() => {
          ticking = false;
        });
    }, 5000);
    await waitUntil(
      async () => (await counts(server, account, dep.body.deployment_id)).succeeded >= DEVICES,
      300_000,
      `every update to ${version} succeeded`,
    ).finally(() => clearInterval(ticker));
    const allMs = performance.now() - t0;
    return { delivery, allMs, counts: await counts(server, account, dep.body.deployment_id) };
  }
  type Delivery = Awaited<ReturnType<typeof deliver>>['delivery'];
  const describe = (d: Delivery) => {
    const { server: sv, postgres: pg, fleet: fl } = d.cpuPerCommand;
    const total = sv + (pg ?? 0) + fl;
    const cpu = `CPU per command from the 202 answer until every command arrived: server ${sv.toFixed(0)} µs, PostgreSQL ${pg === undefined ? 'n/a' : `${pg.toFixed(0)} µs`}, simulated fleet ${fl.toFixed(0)} µs; 5,000 commands/s at that cost need ${((total * 5000) / 1e6).toFixed(2)} cores`;
    return `deployment created in ${d.createMs.toFixed(0)} ms; first command at its device ${d.firstMs.toFixed(0)} ms after the request, the last ${d.lastMs.toFixed(0)} ms after: **${d.rate.toLocaleString('en')} commands/s** from first to last (target >= 5,000/s); ${d.fromRequest.toLocaleString('en')}/s counting from the request (all ${DEVICES.toLocaleString('en')} taken by the broker after ${(d.publishedAllMs / 1000).toFixed(2)} s); ${cpu}`;
  };

  // 2a. The publishing rate: the devices hold their downloads until every command arrived.
  const held = await deliver('1.1.0', true);
  heldCosts.push(held.delivery.cpuPerCommand);
  report(
    `delivery, devices holding their downloads: ${describe(held.delivery)}; every update succeeded ${(held.allMs / 1000).toFixed(1)} s after the request (the held downloads released at 1,000 a second)`,
  );
  if (profileFile || heldOnly) {
    if (profileFile) console.log(`profile of the held delivery: ${profileFile}`);
    await fleet.stop();
    await server.stop();
    process.exit(0);
  }
  // 2b. End to end: the devices download as soon as their command arrives.
  await upload(server, account, 'LIVE', '1.2.0', randomBytes(64 * 1024));
  const live = await deliver('1.2.0', false);
  report(`delivery, devices downloading at once: ${describe(live.delivery)}`);
  report(
    `end to end: all ${live.counts.succeeded.toLocaleString('en')} updates succeeded (download 64 KB, install, reboot, boot-confirmed by heartbeat) ${(live.allMs / 1000).toFixed(1)} s after the deploy request (target < 60 s); failed ${live.counts.failed}, timed_out ${live.counts.timed_out}`,
  );

  // 3. Download throughput: a 4 MB image to many devices at once.
  await upload(server, account, 'LIVE', '1.3.0', randomBytes(4 * 1024 * 1024));
  const bytes0 = await metric(server, 'fleet_firmware_download_bytes_total');
  t0 = performance.now();
  const dl = await deploy(server, account, {
    firmware_version: '1.3.0',
    serials: creds.slice(0, DOWNLOADERS).map((d) => d.serial),
    filter: { model: 'LIVE' },
  });
  await waitUntil(
    async () => (await counts(server, account, dl.body.deployment_id)).succeeded >= DOWNLOADERS,
    300_000,
    'every download',
  );
  const dlSeconds = (performance.now() - t0) / 1000;
  const served = (await metric(server, 'fleet_firmware_download_bytes_total')) - bytes0;
  report(
    `downloads: ${DOWNLOADERS} devices fetched a 4 MB image at once: ${(served / 1e6).toFixed(0)} MB served in ${dlSeconds.toFixed(1)} s = ${(served / 1e6 / dlSeconds).toFixed(0)} MB/s (signed links, streamed from disk; includes install and reboot of each device)`,
  );
  await fleet.stop();

  // 4. Baseline: the same delivery from bare Aedes, with no database, links or records.
  const bare = await startBareAedes();
  const bareFleet = startFleetProcess({
    devices: creds,
    brokerUrl: bare.url,
    firmware: '1.0.0',
    heartbeatS: 30,
    connectRatePerS: 2000,
  });
  try {
    await bareFleet.start();
    await bareFleet.holdDownloads();
    // Warm-up as the service had (its JIT compiled by phases 1 to 3): a first round to a few devices.
    await bare.publishOta(creds.slice(0, Math.min(500, DEVICES)).map((c) => c.serial));
    await sleep(1000);
    const received0 = (await bareFleet.stats()).commandsReceived;
    const cpu0 = await bare.cpu();
    await bare.publishOta(creds.map((c) => c.serial));
    await waitUntil(
      async () => (await bareFleet.stats()).commandsReceived - received0 >= DEVICES,
      60_000,
      'every bare Aedes command delivered',
      50,
    );
    const bareUs = ((await bare.cpu()) - cpu0) / DEVICES;
    bareCommandUs.push(bareUs);
    const ours = heldCosts[0]!.server;
    report(
      `baseline: bare Aedes publishing one QoS 1 command of the same shape to each of ${DEVICES.toLocaleString('en')} simulated devices (downloads held): **${bareUs.toFixed(0)} µs** of broker CPU per command; the held delivery's service CPU (${ours.toFixed(0)} µs) is **${(ours / bareUs).toFixed(2)}x** that, plus ${(heldCosts[0]!.postgres ?? 0).toFixed(0)} µs of PostgreSQL`,
    );
  } finally {
    await bareFleet.stop();
    await bare.stop();
  }
} finally {
  await server.stop();
}

if (!smoke && !process.argv.includes('--dry') && !profileFile) {
  const heldCost = heldCosts[0];
  const bareUs = bareCommandUs[0];
  const perCommand = heldCost ? heldCost.server + (heldCost.postgres ?? 0) : NaN;
  const views = viewCosts[0];
  recordResults({
    current: [
      ...(views
        ? [
            {
              id: `Deployment view at ${SCHEDULE.toLocaleString('en')} targets (CPU per GET, service + database)`,
              figure: `running: ${describeView(views.running)}; finished: ${describeView(views.finished)}`,
              target: 'none set (supporting figure)',
              met: null,
            },
          ]
        : []),
      ...(!heldCost
        ? []
        : [
            {
              id: 'OTA command to a connected device (CPU, service + PostgreSQL)',
              figure: `${perCommand.toFixed(0)} µs (service ${heldCost.server.toFixed(0)} + PostgreSQL ${(heldCost.postgres ?? 0).toFixed(0)}), devices holding their downloads${bareUs === undefined ? '' : `; bare Aedes ${bareUs.toFixed(0)} µs per QoS 1 command (service ${(heldCost.server / bareUs).toFixed(2)}x)`}`,
              target: '<= 120 µs',
              met: perCommand <= 120,
            },
          ]),
    ],
    title: `OTA: scheduling ${SCHEDULE.toLocaleString('en')} targets, ${DEVICES.toLocaleString('en')} devices end to end, download throughput`,
    command:
      `BENCH_DATABASE_URL=${(process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL) ? '<postgres>' : '(embedded)'} node --import tsx bench/ota.bench.ts ${process.argv.slice(2).join(' ')}`.trim(),
    figures,
    notes: [
      `The simulated fleet (mqtt.js clients, sha256 of every download) runs in ${FLEET_PROCESSES} processes of its own (bench/lib/fleet-process.ts) and shares the 2 cores with the server under test; the benchmark process only deploys and polls.`,
    ],
  });
}
process.exit(0);
