import { Pool } from 'undici';
import { startBenchServer, type BenchAccount, type BenchServer } from './lib/bench-server';
import { isSmoke, recordResults, type CurrentFigure } from './lib/results';
import { devicePageQuery } from '#core/devices/store/device-list.store';
import { FEW_MATCHES, type DeviceFilter } from '#core/devices/device-list';
import { versionKey } from '#core/shared/version';

/**
 * What a page of GET /api/v1/devices costs: CPU time of the service process and of the
 * PostgreSQL backends serving its database (pg_stat_activity, from /proc) per page of 100,
 * while 16 clients walk filtered lists by cursor from the first page to the last, in an account
 * of 20,000 devices and in one of 100,000 (both in the same table). Target: at most 1.0 ms per
 * page for each of the model, status, firmware and firmware_lt filters, under 2 ms for a rare
 * search term; a common short term and a combination of filters are printed as supporting
 * figures. Baseline in the same run: GET /healthz under the same clients (the
 * HTTP floor of one request). Then the full streamed listing of the 100,000 (< 2 s, RSS growth
 * < 50 MB, from a collected heap), and the same listing again at once as a supporting figure. Requests per second are a supporting figure: on two shared cores they move by 2x.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/devices-list.bench.ts
 *   options: --dry (print, record nothing) --pages N (pages per filter, default 1600) --smoke
 *   --sizes 20000,100000 and --filters model,status,... (a part of the run; records nothing)
 *   --profile DIR (a CPU profile of the service per measured walk, DIR/<size>-<filter>.cpuprofile,
 *   and of the streamed listing, DIR/stream-<size>.cpuprofile;
 *   profiling costs CPU, so nothing is recorded)
 */
const smoke = isSmoke();
const profileDir = process.argv.includes('--profile') ? process.argv[process.argv.indexOf('--profile') + 1] : undefined;
const argValue = (name: string): number | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : undefined;
};
const argList = (name: string): string[] | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1]?.split(',') : undefined;
};
const dry =
  process.argv.includes('--dry') ||
  profileDir !== undefined ||
  argList('--sizes') !== undefined ||
  argList('--filters') !== undefined;
const SIZES = smoke ? [1000, 3000] : (argList('--sizes')?.map(Number) ?? [20_000, 100_000]);
const PAGES = smoke ? 40 : (argValue('--pages') ?? 1600);
const CLIENTS = 16;
const TARGET_MS = 1.0;
const MODELS = [
  { name: 'LX-200', share: 0.6 },
  { name: 'LX-300', share: 0.3 },
  { name: 'LX-400', share: 0.1 },
];
/** What heartbeats would have reported: a quarter each on 1.9.0, 1.10.0, 2.0.0, and never reported. */
const FIRMWARE = ['1.9.0', '1.10.0', '2.0.0'];

interface Scenario {
  name: string;
  query: string;
  filter: DeviceFilter;
  /**
   * Which target the figure is judged by: `page`, the page target (TARGET_MS, the worst of these
   * filters); `rare`, a target of its own (RARE_TARGET_MS, its own row); `none`, a supporting
   * figure printed in the table only (a short common search term, a combination of filters).
   */
  target: 'page' | 'rare' | 'none';
}
const RARE_TARGET_MS = 2.0;
const SCENARIOS: Scenario[] = [
  { name: 'model', query: 'model=LX-300', filter: { model: 'LX-300' }, target: 'page' },
  { name: 'status', query: 'status=offline', filter: { status: 'offline' }, target: 'page' },
  { name: 'firmware', query: 'firmware=1.10.0', filter: { firmware: '1.10.0' }, target: 'page' },
  { name: 'firmware_lt', query: 'firmware_lt=2.0.0', filter: { firmwareLt: '2.0.0' }, target: 'page' },
  { name: 'q', query: 'q=12', filter: { q: '12' }, target: 'none' },
  // A rare term (under 2 ms): 120 serials of the 100,000 hold "0999" (12 of the 20,000).
  { name: 'q_rare', query: 'q=0999', filter: { q: '0999' }, target: 'rare' },
  {
    name: 'model+status',
    query: 'model=LX-300&status=offline',
    filter: { model: 'LX-300', status: 'offline' },
    target: 'none',
  },
];

const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const fmt = (ms: number) => ms.toFixed(2);

async function seed(server: BenchServer, size: number, prefix: string): Promise<BenchAccount> {
  const account = await server.createAccount({ quota: size });
  const post = async (path: string, body: unknown) => {
    const res = await fetch(server.httpUrl + path, {
      method: 'POST',
      headers: { ...account.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${(await res.text()).slice(0, 300)}`);
    await res.arrayBuffer();
  };
  for (const model of MODELS) await post('/api/v1/models', { name: model.name });
  // Claimed through the API in runs of 1,000 serials, each run split 600/300/100 between the
  // models: the service's own claim code and rules, and every model spread over the serials.
  for (let start = 0; start < size; start += 1000) {
    let at = start;
    const end = Math.min(size, start + 1000);
    for (const model of MODELS) {
      const count = model === MODELS.at(-1) ? end - at : Math.round((end - start) * model.share);
      const serials = Array.from({ length: count }, (_, i) => `${prefix}-${String(at + i).padStart(6, '0')}`);
      if (serials.length) await post('/api/v1/devices/claim', { serials, model: model.name });
      at += count;
    }
  }
  // What heartbeats would have left (the broker owns that path): firmware, 70 % online.
  await server.sql(
    `UPDATE devices SET firmware = v.version, firmware_key = v.version_key,
       status = CASE WHEN random() < 0.7 THEN 'online' ELSE 'offline' END,
       ip = '10.0.' || (random() * 255)::int || '.' || (random() * 255)::int, last_seen = now()
     FROM (SELECT id, (row_number() OVER (ORDER BY serial)) % 4 AS bucket FROM devices WHERE account_id = ?) b
     JOIN (VALUES (0, ?, ?), (1, ?, ?), (2, ?, ?)) AS v(bucket, version, version_key) ON v.bucket = b.bucket
     WHERE devices.id = b.id`,
    [account.accountId, ...FIRMWARE.flatMap((v) => [v, versionKey(v)])],
  );
  await server.sql(`UPDATE devices SET connectivity = status WHERE account_id = ?`, [account.accountId]);
  return account;
}

/**
 * CLIENTS loops, each walking the list from its first page to its last by next_cursor and
 * starting over, until `pages` pages were fetched in all. Checks that each walk saw `total`
 * devices in pages of 100 (a walk cut by the end of the run is not checked).
 */
/**
 * The clients share the two cores with the service: they read only what a walk needs (the tail's
 * total and next_cursor, and how many devices the page holds) instead of parsing every page, and
 * use undici's request on one keep-alive pool. With fetch and JSON.parse of each 50 KB page the
 * clients took a core's worth of CPU, and the service's own CPU per request grew with it.
 */
const pool = (url: string) => new Pool(new URL(url).origin, { connections: CLIENTS, pipelining: 1 });
const TAIL = /"total":(\d+),"quota":\d+,"next_cursor":(null|"[^"]*")\}$/;

function devicesIn(body: string): number {
  let count = 0;
  for (let at = body.indexOf('{"serial":'); at >= 0; at = body.indexOf('{"serial":', at + 10)) count++;
  return count;
}

async function walk(input: { url: string; headers: Record<string, string>; pages: number }) {
  const http = pool(input.url);
  const base = new URL(input.url);
  let left = input.pages;
  let walks = 0;
  const client = async () => {
    while (left > 0) {
      let cursor: string | null = null;
      let seen = 0;
      let total: number | undefined;
      do {
        if (left-- <= 0) return;
        const path: string = `${base.pathname}${base.search}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const res = await http.request({ method: 'GET', path, headers: input.headers });
        const body = await res.body.text();
        const tail = TAIL.exec(body);
        if (res.statusCode !== 200 || !tail) throw new Error(`${path}: ${res.statusCode} ${body.slice(0, 200)}`);
        const pageTotal = Number(tail[1]);
        total ??= pageTotal;
        if (pageTotal !== total) throw new Error(`total changed during a walk: ${total} then ${pageTotal}`);
        const count = devicesIn(body);
        seen += count;
        cursor = tail[2] === 'null' ? null : (JSON.parse(tail[2]!) as string);
        if (cursor !== null && count !== 100) throw new Error(`short page before the end: ${path}`);
      } while (cursor !== null);
      if (seen !== total) throw new Error(`a walk saw ${seen} devices of total ${total}: ${input.url}`);
      walks += 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, client));
  await http.close();
  return { seconds: (performance.now() - started) / 1000, walks };
}

/** GET /api/v1/devices without a limit, read to its end: time, server CPU and RSS (sampled every 5 ms). */
async function streamList(
  server: BenchServer,
  large: { size: number; account: BenchAccount },
  profile: string | undefined,
) {
  const before = await server.startRssSampling();
  if (profile) await server.startProfile();
  const cpuBefore = await server.cpu();
  const started = performance.now();
  const res = await fetch(`${server.httpUrl}/api/v1/devices`, { headers: large.account.headers });
  let bytes = 0;
  let tail = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    bytes += chunk.byteLength;
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-200);
  }
  const seconds = (performance.now() - started) / 1000;
  if (profile) await server.stopProfile(`${profile}/stream-${large.size}.cpuprofile`);
  const { peakRss } = await server.stopRssSampling();
  const cpu = await server.cpu();
  const total = Number(/"total":(\d+)/.exec(tail)?.[1]);
  if (res.status !== 200 || total !== large.size) throw new Error(`stream: status ${res.status}, total ${total}`);
  return {
    bytes,
    seconds,
    cpuSeconds: (cpu.user + cpu.system - cpuBefore.user - cpuBefore.system) / 1e6,
    rss: before.rss,
    peakRss,
    growth: peakRss - before.rss,
  };
}

/** HTTP floor: the same clients asking GET /healthz `requests` times in all. */
async function healthz(input: { url: string; requests: number }) {
  const http = pool(input.url);
  let left = input.requests;
  const client = async () => {
    while (left-- > 0) {
      const res = await http.request({ method: 'GET', path: '/healthz' });
      await res.body.dump();
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  await http.close();
}

/**
 * Service and PostgreSQL CPU (µs) that `work` cost, less what the idle service spends in the same
 * time on its own (background timers: presence sweep, OTA sweep, outbox poll, health probe),
 * measured by `idleRate` before the runs.
 */
async function measure<T>(server: BenchServer, work: () => Promise<T>, idle = { service: 0, postgres: 0 }) {
  const meter = await server.postgresCpu();
  const before = await server.cpu();
  await meter?.start();
  const started = performance.now();
  const result = await work();
  const seconds = (performance.now() - started) / 1000;
  const postgres = (await meter?.stop()) ?? 0;
  const after = await server.cpu();
  await meter?.close();
  return {
    transactions: meter?.transactions ?? 0,
    service: after.user + after.system - before.user - before.system - idle.service * seconds,
    postgres: postgres - idle.postgres * seconds,
    result,
  };
}

/** CPU µs per second the service and its PostgreSQL backends spend with no request at all. */
async function idleRate(server: BenchServer): Promise<{ service: number; postgres: number }> {
  const seconds = smoke ? 1 : 10;
  const idle = await measure(server, () => new Promise((resolve) => setTimeout(resolve, seconds * 1000)));
  return { service: idle.service / seconds, postgres: idle.postgres / seconds };
}

const server = await startBenchServer();
try {
  const seedStarted = performance.now();
  const accounts: Array<{ size: number; account: BenchAccount }> = [];
  for (const [i, size] of SIZES.entries()) accounts.push({ size, account: await seed(server, size, `A${i}`) });
  const seedSeconds = (performance.now() - seedStarted) / 1000;
  if (server.database === 'postgres') await server.sql('VACUUM ANALYZE');

  const figures: string[] = [
    `database: ${server.database}; ${SIZES.map((s) => s.toLocaleString('en')).join(' + ')} devices in two accounts of one table, claimed through POST /api/v1/devices/claim (1,000 a request) in ${seedSeconds.toFixed(0)} s; firmware and status set by bulk UPDATE`,
    `each figure: ${PAGES} pages of 100 walked by cursor from the first page to the last by ${CLIENTS} clients (after a warm-up walk); CPU per page = (service CPU + CPU of the PostgreSQL backends of its database) / pages`,
  ];
  const current: CurrentFigure[] = [];

  const idle = await idleRate(server);
  figures.push(
    `idle service: ${(idle.service / 1000).toFixed(1)} ms CPU per second (+ PostgreSQL ${(idle.postgres / 1000).toFixed(1)} ms), subtracted from every figure below for the time it ran`,
  );
  const floor = await measure(server, () => healthz({ url: server.httpUrl, requests: PAGES }), idle);
  const floorMs = (floor.service + floor.postgres) / 1000 / PAGES;
  figures.push(`baseline GET /healthz, same clients: **${fmt(floorMs)} ms** CPU per request (service)`);

  for (const { size, account } of accounts) {
    const rows: string[] = [];
    const own: CurrentFigure[] = [];
    let worst = { ms: 0, filter: '' };
    for (const scenario of SCENARIOS.filter((sc) => argList('--filters')?.includes(sc.name) ?? true)) {
      const url = `${server.httpUrl}/api/v1/devices?${scenario.query}`;
      const first = (await (await fetch(`${url}&limit=100`, { headers: account.headers })).json()) as { total: number };
      await walk({ url, headers: account.headers, pages: Math.min(200, PAGES) });
      if (profileDir) await server.startProfile();
      const cost = await measure(server, () => walk({ url, headers: account.headers, pages: PAGES }), idle);
      if (profileDir) await server.stopProfile(`${profileDir}/${size}-${scenario.name}.cpuprofile`);
      const { seconds } = cost.result;
      const perPage = (cost.service + cost.postgres) / 1000 / PAGES;
      if (scenario.target === 'page' && perPage >= worst.ms) worst = { ms: perPage, filter: scenario.query };
      if (scenario.target === 'rare')
        own.push({
          id: `REST page of 100, ${size.toLocaleString('en')} devices, rare search term (${scenario.query})`,
          figure: `${fmt(perPage)} ms CPU per page (service + PostgreSQL), ${first.total.toLocaleString('en')} matches`,
          target: `< ${RARE_TARGET_MS.toFixed(1)} ms`,
          met: perPage < RARE_TARGET_MS,
        });
      const page = devicePageQuery({
        accountId: account.accountId,
        filter: scenario.filter,
        afterSerial: null,
        limit: 101,
        // As the service asks for it: a search counted to few matches reads them from the terms.
        ...(scenario.filter.q !== undefined && first.total <= FEW_MATCHES ? { fewMatches: true } : {}),
      });
      const plan = (await server.sql(`EXPLAIN (ANALYZE, FORMAT JSON) ${page.sql}`, page.bindings)).rows as Array<{
        'QUERY PLAN': Array<{ 'Planning Time': number; 'Execution Time': number }>;
      }>;
      const timing = plan[0]?.['QUERY PLAN'][0];
      rows.push(
        `| ${scenario.query} | ${first.total.toLocaleString('en')} | **${fmt(perPage)}** | ${fmt(cost.service / 1000 / PAGES)} | ${fmt(cost.postgres / 1000 / PAGES)} | ${(perPage / floorMs).toFixed(1)} | ${Math.round(PAGES / seconds)} | ${fmt(timing?.['Planning Time'] ?? NaN)} / ${fmt(timing?.['Execution Time'] ?? NaN)} |`,
      );
      console.log(
        `${size} devices, ${scenario.query}: ${fmt(perPage)} ms per page, ${(cost.transactions / PAGES).toFixed(2)} statements per page`,
      );
    }
    figures.push(
      '',
      `${size.toLocaleString('en')} devices in the account:`,
      '',
      '| filter | matches | CPU ms per page | service | PostgreSQL | x healthz | pages/s | first page plan: planning / execution ms |',
      '|---|---|---|---|---|---|---|---|',
      ...rows,
    );
    current.push(
      {
        id: `REST page of 100, ${size.toLocaleString('en')} devices`,
        figure: `${fmt(worst.ms)} ms CPU per page, worst of the model, status, firmware and firmware_lt filters (${worst.filter}; service + PostgreSQL)`,
        target: `<= ${TARGET_MS.toFixed(1)} ms, each of the four filters`,
        met: worst.ms <= TARGET_MS,
      },
      ...own,
    );
  }

  // The full streamed listing of the large account, from a collected heap (the target's figure),
  // then once more at once: V8's young generation, which a full collection shrinks, has grown to
  // its working size by then, so the second growth is what the stream itself holds.
  const large = accounts.at(-1)!;
  await server.gc();
  await new Promise((resolve) => setTimeout(resolve, 500));
  const first = await streamList(server, large, profileDir);
  const again = await streamList(server, large, undefined);
  figures.push(
    '',
    `full streamed listing of ${large.size.toLocaleString('en')} devices (${mb(first.bytes)} MB JSON): **${first.seconds.toFixed(2)} s** (server CPU ${first.cpuSeconds.toFixed(2)} s), server RSS ${mb(first.rss)} MB -> peak ${mb(first.peakRss)} MB, **growth ${mb(first.growth)} MB** (target < 2 s, < 50 MB); the same listing again at once: ${again.seconds.toFixed(2)} s, RSS ${mb(again.rss)} MB -> peak ${mb(again.peakRss)} MB, growth ${mb(again.growth)} MB`,
  );
  current.push({
    id: `Streamed listing, ${large.size.toLocaleString('en')} devices`,
    figure: `${first.seconds.toFixed(2)} s, RSS growth ${mb(first.growth)} MB (${mb(again.growth)} MB the second time, at once)`,
    target: '< 2 s, < 50 MB',
    met: first.seconds < 2 && first.growth < 50 * 1024 * 1024,
  });

  for (const f of figures) console.log(f);
  if (!smoke && !dry) {
    recordResults({
      title: 'GET /api/v1/devices: CPU per page of 100 at 20,000 and 100,000 devices',
      command: `${process.env.BENCH_DATABASE_URL ? 'BENCH_DATABASE_URL=... ' : ''}node --import tsx bench/devices-list.bench.ts`,
      figures,
      current,
    });
  }
} finally {
  await server.stop();
}
