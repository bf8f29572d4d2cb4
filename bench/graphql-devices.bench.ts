import autocannon from 'autocannon';
import { startBenchServer } from './lib/bench-server';
import { runLoad, type LoadResult } from './lib/load';
import { isSmoke, recordResults } from './lib/results';
import type { BenchServer } from './lib/bench-server';

/**
 * GraphQL `devices(first: 100)` against REST's page of 100 (target: GraphQL at least a
 * third of REST's requests per second). Same account, same devices, same fields (the spec's
 * seven), both with an API key, autocannon at fixed concurrency against a child-process server.
 * Each run also reads the CPU per request of the service and of the PostgreSQL backends of its
 * database (/proc): GraphQL's page against REST's is the figure the shared machine keeps stable.
 * `--smoke`: 300 devices, 1 s each, nothing recorded.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/graphql-devices.bench.ts
 */
const smoke = isSmoke();
const DEVICES = smoke ? 300 : 10_000;
const SECONDS = smoke ? 1 : 10;
const CONNECTIONS = 32;

const QUERY =
  'query Page($first: Int!) { devices(first: $first) { totalCount edges { node { serial name model firmware status lastSeen ip } } pageInfo { hasNextPage endCursor } } }';
const RICH_QUERY =
  'query Rich($first: Int!) { devices(first: $first) { totalCount quota edges { cursor node { id serial name model firmware status lastSeen ip connectivity tags claimedAt update { state progress targetVersion } config { desiredVersion reportedVersion inSync desired { dimLevel heartbeatIntervalS timezone } } } } pageInfo { hasNextPage endCursor } } }';

async function postLoad(
  url: string,
  headers: Record<string, string>,
  body: string,
  seconds: number,
): Promise<LoadResult> {
  // autocannon's bundled declaration (bench/lib/autocannon.d.ts) lists only GET options.
  const options = {
    url,
    headers: { ...headers, 'content-type': 'application/json' },
    connections: CONNECTIONS,
    duration: seconds,
    method: 'POST',
    body,
  } as unknown as Parameters<typeof autocannon>[0];
  const result = await autocannon(options);
  return {
    requests: result.requests.total,
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/** CPU per request (µs) of the service and of its PostgreSQL backends while `run` loads it. */
async function withCpu(
  server: BenchServer,
  run: () => Promise<LoadResult>,
): Promise<LoadResult & { serviceUs: number; postgresUs: number }> {
  const meter = await server.postgresCpu();
  await meter?.start();
  const cpu0 = await server.cpu();
  const result = await run();
  const cpu1 = await server.cpu();
  const postgres = (await meter?.stop()) ?? 0;
  await meter?.close();
  const requests = Math.max(1, result.requests);
  return {
    ...result,
    serviceUs: (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / requests,
    postgresUs: postgres / requests,
  };
}
const cpuText = (r: { serviceUs: number; postgresUs: number }) =>
  `${((r.serviceUs + r.postgresUs) / 1000).toFixed(2)} ms CPU per request (service ${(r.serviceUs / 1000).toFixed(2)} + PostgreSQL ${(r.postgresUs / 1000).toFixed(2)})`;

// NODE_ENV=production as a deployment runs it: graphql-js then skips its development-only
// cross-realm instanceof checks (measured at about 7 % of a GraphQL request's CPU here).
const server = await startBenchServer({ env: { NODE_ENV: 'production' } });
try {
  const account = await server.createAccount({ quota: DEVICES });
  const post = (path: string, body: unknown) =>
    fetch(server.httpUrl + path, {
      method: 'POST',
      headers: { ...account.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  if ((await post('/api/v1/models', { name: 'LX-200' })).status !== 201) throw new Error('model');
  for (let c = 0; c * 1000 < DEVICES; c++) {
    const serials = Array.from(
      { length: Math.min(1000, DEVICES - c * 1000) },
      (_, i) => `SN-${String(c * 1000 + i).padStart(6, '0')}`,
    );
    const res = await post('/api/v1/devices/claim', { serials, model: 'LX-200' });
    if (res.status !== 201) throw new Error(`claim: ${res.status} ${(await res.text()).slice(0, 200)}`);
    await res.arrayBuffer();
  }
  await server.sql(
    `UPDATE devices SET firmware = '1.4.2', firmware_key = '0000000001.0000000004.0000000002.0000000000~', status = 'online', connectivity = 'online', ip = '10.0.4.17', last_seen = now()`,
  );
  if (server.database === 'postgres') await server.sql('VACUUM ANALYZE devices');

  const restUrl = `${server.httpUrl}/api/v1/devices?limit=100`;
  const graphqlUrl = `${server.httpUrl}/graphql`;
  const body = JSON.stringify({ query: QUERY, variables: { first: 100 } });
  const richBody = JSON.stringify({ query: RICH_QUERY, variables: { first: 100 } });
  const check = await fetch(graphqlUrl, {
    method: 'POST',
    headers: { ...account.headers, 'content-type': 'application/json' },
    body,
  });
  const checked = (await check.json()) as { data?: { devices: { edges: unknown[] } }; errors?: unknown };
  if (checked.data?.devices.edges.length !== 100)
    throw new Error(`graphql check failed: ${JSON.stringify(checked).slice(0, 300)}`);

  // Warm-up of both paths (JIT, caches, connection pools), then the measured runs, REST first.
  await runLoad({ url: restUrl, headers: account.headers, connections: CONNECTIONS, durationSeconds: 1 });
  await postLoad(graphqlUrl, account.headers, body, 1);
  const rest = await withCpu(server, () =>
    runLoad({ url: restUrl, headers: account.headers, connections: CONNECTIONS, durationSeconds: SECONDS }),
  );
  const graphql = await withCpu(server, () => postLoad(graphqlUrl, account.headers, body, SECONDS));
  const rich = await withCpu(server, () => postLoad(graphqlUrl, account.headers, richBody, SECONDS));
  const cpuOf = (r: { serviceUs: number; postgresUs: number }) => r.serviceUs + r.postgresUs;
  const cpuRatio = cpuOf(graphql) / cpuOf(rest);
  // Non-2xx answers are reported, not hidden: on an overloaded machine the database probe can
  // briefly answer 503 (core/db/database-health.ts), which a figure must not silently include.
  const failures = (r: LoadResult) => (r.non2xx || r.errors ? ` (**${r.non2xx} non-2xx, ${r.errors} errors**)` : '');
  const ratio = graphql.requestsPerSecond / rest.requestsPerSecond;
  const figures = [
    `database: ${server.database}; ${DEVICES.toLocaleString('en')} devices in one account; autocannon ${CONNECTIONS} connections, ${SECONDS} s per run, API key`,
    `REST GET /api/v1/devices?limit=100: **${Math.round(rest.requestsPerSecond)} req/s**, p50 ${rest.p50Ms} ms, p99 ${rest.p99Ms} ms; ${cpuText(rest)}${failures(rest)}`,
    `GraphQL devices(first: 100) { totalCount, 7 fields, pageInfo }: **${Math.round(graphql.requestsPerSecond)} req/s**, p50 ${graphql.p50Ms} ms, p99 ${graphql.p99Ms} ms: **${(ratio * 100).toFixed(0)} % of REST** (target >= 33 %); ${cpuText(graphql)}: **${cpuRatio.toFixed(2)}x REST's**${failures(graphql)}`,
    `GraphQL devices(first: 100) with 20 fields incl. nested update/config: ${Math.round(rich.requestsPerSecond)} req/s, p50 ${rich.p50Ms} ms, p99 ${rich.p99Ms} ms; ${cpuText(rich)}${failures(rich)}`,
  ];
  for (const f of figures) console.log(f);
  if (!smoke) {
    recordResults({
      title: 'GraphQL devices(first: 100) vs REST page of 100',
      command: `${process.env.BENCH_DATABASE_URL ? 'BENCH_DATABASE_URL=... ' : ''}node --import tsx bench/graphql-devices.bench.ts`,
      figures,
      current: [
        {
          id: 'GraphQL devices(first: 100) vs REST page of 100 (requests/s)',
          figure: `${(ratio * 100).toFixed(0)} % of REST; CPU per page ${(cpuOf(graphql) / 1000).toFixed(2)} ms against REST's ${(cpuOf(rest) / 1000).toFixed(2)} ms (service + PostgreSQL): ${cpuRatio.toFixed(2)}x`,
          target: '>= 33 %',
          met: ratio >= 1 / 3,
        },
      ],
    });
  }
} finally {
  await server.stop();
}
