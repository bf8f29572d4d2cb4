import { startBenchServer } from './lib/bench-server';
import { runLoad } from './lib/load';
import { postgresCpuMicros } from './lib/postgres-cpu';
import { isSmoke, recordResults } from './lib/results';
import { devicePageQuery } from '../api/src/domain/devices/store/device-list.store';

/**
 * GET /api/v1/devices with 100,000 devices in one account:
 *  - a filtered page of 100 (model + firmware_lt + limit=100): >= 2,500 requests/s, p99 < 25 ms;
 *  - the full streamed listing: < 2 s, server RSS growth < 50 MB.
 * Devices are claimed through the API (100 claims of 1,000: the service's own claim code and
 * rules); the firmware a heartbeat would report is then set with one bulk UPDATE (the broker
 * owns that path). `--smoke`: 2,000 devices, 2 s of load, nothing recorded.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/devices-list.bench.ts [--dry: print, record nothing]
 */
const smoke = isSmoke();
const CLAIMS = smoke ? 2 : 100;
const PER_CLAIM = 1000;
const LOAD_SECONDS = smoke ? 2 : 20;
const CONNECTIONS = 32;
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

const server = await startBenchServer();
try {
  const account = await server.createAccount({ quota: CLAIMS * PER_CLAIM });
  const post = (path: string, body: unknown) =>
    fetch(server.httpUrl + path, {
      method: 'POST',
      headers: { ...account.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  for (const model of ['LX-200', 'LX-300']) {
    const res = await post('/api/v1/models', { name: model });
    if (res.status !== 201) throw new Error(`model: ${res.status} ${await res.text()}`);
  }

  const seedStarted = performance.now();
  for (let c = 0; c < CLAIMS; c++) {
    const serials = Array.from({ length: PER_CLAIM }, (_, i) => `SN-${String(c * PER_CLAIM + i).padStart(6, '0')}`);
    const res = await post('/api/v1/devices/claim', { serials, model: c % 5 < 3 ? 'LX-200' : 'LX-300' });
    if (res.status !== 201) throw new Error(`claim ${c}: ${res.status} ${(await res.text()).slice(0, 300)}`);
    await res.arrayBuffer();
  }
  const seedSeconds = (performance.now() - seedStarted) / 1000;
  // What heartbeats would have reported: a quarter each on 1.9.0, 1.10.0, 2.0.0, and never reported.
  await server.sql(`
    UPDATE devices SET
      firmware = v.version, firmware_key = v.version_key, status = CASE WHEN random() < 0.7 THEN 'online' ELSE 'offline' END,
      ip = '10.0.' || (random() * 255)::int || '.' || (random() * 255)::int, last_seen = now()
    FROM (SELECT id, (row_number() OVER (ORDER BY serial)) % 4 AS bucket FROM devices) b
    JOIN (VALUES (0, '1.9.0', '0000000001.0000000009.0000000000.0000000000~'),
                 (1, '1.10.0', '0000000001.0000000010.0000000000.0000000000~'),
                 (2, '2.0.0', '0000000002.0000000000.0000000000.0000000000~')) AS v(bucket, version, version_key) ON v.bucket = b.bucket
    WHERE devices.id = b.id`);
  if (server.database === 'postgres') await server.sql('VACUUM ANALYZE devices');

  // The plan of the exact page statement: which index serves it.
  const pageQuery = devicePageQuery({
    accountId: account.accountId,
    filter: { model: 'LX-200', firmwareLt: '2.0.0' },
    afterSerial: null,
    limit: 101,
  });
  const plan = (await server.sql(`EXPLAIN (ANALYZE, FORMAT JSON) ${pageQuery.sql}`, pageQuery.bindings)).rows as Array<
    Record<string, unknown>
  >;
  const planText = JSON.stringify(plan);
  const indexes = [...new Set([...planText.matchAll(/"Index Name":"([a-z_]+)"/g)].map((m) => m[1]))];
  const planMs = (
    plan[0]?.['QUERY PLAN'] as Array<{ 'Execution Time': number; 'Planning Time': number }> | undefined
  )?.[0];

  // Filtered page of 100.
  const pageUrl = `${server.httpUrl}/api/v1/devices?model=LX-200&firmware_lt=2.0.0&limit=100`;
  const check = await fetch(pageUrl, { headers: account.headers });
  const checkBody = (await check.json()) as { devices: unknown[]; total: number };
  if (check.status !== 200 || checkBody.devices.length !== 100) throw new Error(`page check failed: ${check.status}`);
  await runLoad({ url: pageUrl, headers: account.headers, connections: CONNECTIONS, durationSeconds: smoke ? 1 : 3 }); // warm-up
  const cpuBefore = await server.cpu();
  const pgBefore = server.database === 'postgres' ? postgresCpuMicros() : undefined;
  const load = await runLoad({
    url: pageUrl,
    headers: account.headers,
    connections: CONNECTIONS,
    durationSeconds: LOAD_SECONDS,
  });
  const cpuAfter = await server.cpu();
  const pgAfter = pgBefore === undefined ? undefined : postgresCpuMicros();
  const pgPerRequestMs =
    pgBefore !== undefined && pgAfter !== undefined
      ? (pgAfter - pgBefore) / 1000 / Math.max(1, load.requests)
      : undefined;
  // CPU the server spent per request: unlike req/s, it barely depends on what else runs on the machine.
  const cpuPerRequestMs =
    (cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system) / 1000 / Math.max(1, load.requests);
  if (load.non2xx > 0 || load.errors > 0) throw new Error(`page load: ${load.non2xx} non-2xx, ${load.errors} errors`);

  // Full streamed listing.
  await server.gc();
  await new Promise((resolve) => setTimeout(resolve, 500));
  // Baseline: RSS when sampling starts (after a GC and a pause); growth = peak while streaming - baseline.
  const before = await server.startRssSampling();
  const streamCpuBefore = await server.cpu();
  const streamStarted = performance.now();
  const res = await fetch(`${server.httpUrl}/api/v1/devices`, { headers: account.headers });
  let bytes = 0;
  let tail = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    bytes += chunk.byteLength;
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-200);
  }
  const streamSeconds = (performance.now() - streamStarted) / 1000;
  const { peakRss } = await server.stopRssSampling();
  const streamCpu = await server.cpu();
  const streamCpuSeconds = (streamCpu.user + streamCpu.system - streamCpuBefore.user - streamCpuBefore.system) / 1e6;
  const total = Number(/"total":(\d+)/.exec(tail)?.[1]);
  if (res.status !== 200 || total !== CLAIMS * PER_CLAIM)
    throw new Error(`stream: status ${res.status}, total ${total}`);
  const growth = peakRss - before.rss;

  const figures = [
    `database: ${server.database}; devices: ${total.toLocaleString('en')} in one account, seeded by ${CLAIMS} claims of ${PER_CLAIM} through POST /api/v1/devices/claim in ${seedSeconds.toFixed(1)} s, firmware set by one bulk UPDATE`,
    `filtered page (model=LX-200&firmware_lt=2.0.0&limit=100, ${checkBody.total.toLocaleString('en')} matches), autocannon ${CONNECTIONS} connections, ${LOAD_SECONDS} s: ` +
      `**${Math.round(load.requestsPerSecond)} req/s**, p50 ${load.p50Ms} ms, **p99 ${load.p99Ms} ms** (${load.requests} requests; target >= 2,500 req/s, p99 < 25 ms); ` +
      `server CPU ${cpuPerRequestMs.toFixed(2)} ms per request (one free core: about ${Math.round(1000 / cpuPerRequestMs)} req/s of Node work)` +
      (pgPerRequestMs === undefined
        ? ''
        : `, PostgreSQL CPU ${pgPerRequestMs.toFixed(2)} ms per request (all postgres processes)`),
    `page statement: indexes ${indexes.join(', ') || '(none)'}; planning ${planMs?.['Planning Time'].toFixed(2)} ms, execution ${planMs?.['Execution Time'].toFixed(2)} ms (EXPLAIN ANALYZE)`,
    `full streamed listing (${(bytes / 1024 / 1024).toFixed(1)} MB JSON): **${streamSeconds.toFixed(2)} s** (server CPU ${streamCpuSeconds.toFixed(2)} s), server RSS ${mb(before.rss)} MB -> peak ${mb(peakRss)} MB, **growth ${mb(growth)} MB** (target < 2 s, < 50 MB)`,
  ];
  for (const f of figures) console.log(f);
  if (!smoke && !process.argv.includes('--dry')) {
    recordResults({
      title: 'GET /api/v1/devices, 100,000 devices',
      command: `${process.env.BENCH_DATABASE_URL ? 'BENCH_DATABASE_URL=... ' : ''}node --import tsx bench/devices-list.bench.ts`,
      figures,
    });
  }
} finally {
  await server.stop();
}
