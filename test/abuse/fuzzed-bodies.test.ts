import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { allRoutes } from '#rest/routes/index';
import type { RouteDef } from '#rest/route';
import { ifStarted } from '../helpers/teardown';

/**
 * OWASP API4/API8: every REST route with a JSON body, fed wrong types, huge arrays, deep
 * nesting, NUL bytes and injection strings, answers 4xx, never 5xx, and the process stays up.
 * The list of routes comes from the route table, so new routes are covered automatically.
 */
const deep = (levels: number): string => '{"a":'.repeat(levels) + '"x"' + '}'.repeat(levels);
const INJECTIONS = [
  "' OR 1=1 --",
  '"; DROP TABLE devices; --',
  '\u0000',
  '../../etc/passwd',
  '<script>alert(1)</script>',
  '${7*7}',
  '%00',
  '\uD800',
];

const BODIES: Array<[string, string]> = [
  ['null', 'null'],
  ['array', '[]'],
  ['string', '"hello"'],
  ['number', '42'],
  ['empty object', '{}'],
  ['deep nesting', deep(5000)],
  ['very deep nesting', deep(100_000)],
  [
    'huge array',
    JSON.stringify({ serials: Array.from({ length: 100_000 }, (_, i) => `S${i}`), model: 'm', firmware: '1.0' }),
  ],
  [
    'NUL in strings',
    JSON.stringify({
      name: 'a\u0000b',
      serials: ['A\u0000'],
      model: '\u0000',
      firmware_version: '1.0\u0000',
      url: 'http://\u0000',
    }),
  ],
  [
    'wrong types',
    JSON.stringify({
      name: 1,
      serials: 'x',
      model: [],
      firmware: {},
      firmware_version: true,
      filter: 'x',
      config: [],
      tags: 'x',
      role: 7,
      url: 5,
    }),
  ],
  ...INJECTIONS.map((s): [string, string] => [
    `injection ${JSON.stringify(s)}`,
    JSON.stringify({
      name: s,
      serial: s,
      serials: [s],
      model: s,
      firmware: s,
      firmware_version: s,
      filter: { model: s, firmware_lt: s },
      url: s,
      role: s,
      email: s,
      password: s,
    }),
  ]),
  ['prototype pollution', '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}'],
];

describe('fuzzed JSON bodies never give a 5xx', () => {
  let server: TestServer;
  let account: TestAccount;
  let routes: RouteDef[];

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    await server.service.services.apiKeys.setRateLimit(account.apiKeyId, 1_000_000);
    routes = allRoutes(server.service.services).filter((r) => r.body);
  });
  afterAll(async () => ifStarted(server)?.close());

  it('covers at least the claim, deploy, PATCH and key routes', () => {
    const paths = routes.map((r) => `${r.method} ${r.path}`);
    expect(paths).toContain('post /api-keys');
  });

  it('answers every route and body with a 4xx problem (or success), never 5xx', { timeout: 120_000 }, async () => {
    const failures: string[] = [];
    for (const route of routes) {
      const path =
        '/api/v1' +
        route.path
          .replace(/:serial/g, 'NOPE-1')
          .replace(/:id/g, '00000000-0000-4000-8000-000000000000')
          .replace(/:[a-zA-Z_]+/g, 'x');
      for (const [label, body] of BODIES) {
        const res = await account.api.request(route.method.toUpperCase(), path, {
          rawBody: body,
          headers: { 'content-type': 'application/json' },
        });
        if (res.status >= 500)
          failures.push(
            `${route.method.toUpperCase()} ${route.path} with ${label}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`,
          );
      }
    }
    expect(failures).toEqual([]);
    expect((await account.api.get('/healthz')).status).toBe(200);
  });

  it('refuses a 1 MB body with 413 on every JSON route', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) });
    for (const route of routes) {
      const path = '/api/v1' + route.path.replace(/:[a-zA-Z_]+/g, 'x');
      const res = await account.api.request(route.method.toUpperCase(), path, {
        rawBody: big,
        headers: { 'content-type': 'application/json' },
      });
      expect([404, 413]).toContain(res.status);
    }
  });
});
