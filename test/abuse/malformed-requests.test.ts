import net from 'node:net';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, claimDevices } from '../helpers/factories';
import { collect, gql, wsClient } from '../graphql/graphql-client';
import { allRoutes } from '#rest/routes/index';
import { ifStarted } from '../helpers/teardown';

/**
 * Malformed input that never reaches a route's schema (undecodable path segments and cookies,
 * NUL characters in GraphQL arguments) is the caller's error: a 4xx problem with a stable code,
 * never a 500 and never Express's default HTML page with a stack trace.
 */
describe('malformed requests answer 4xx problem+json, never a 500 or a stack', () => {
  let server: TestServer;
  let account: TestAccount;
  let url: string;

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    await server.service.services.apiKeys.setRateLimit(account.apiKeyId, 1_000_000);
    url = server.service.httpUrl;
    await buildModel(account);
    await claimDevices(account, { serials: ['NUL-1'], model: 'LX-200' });
  });
  afterAll(async () => ifStarted(server)?.close());

  const expectProblem = (res: { status: number; headers: Headers; body: unknown }, status: number, code: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const body = res.body as { code: string; detail: string; stack?: unknown };
    expect(body.code).toBe(code);
    expect(JSON.stringify(body)).not.toMatch(/URIError|at \w+ \(|node_modules|\/work\//);
  };

  it('answers an undecodable path segment with 400 malformed_request on the API and the download route', async () => {
    for (const path of ['/api/v1/devices/%C0%AF', '/api/v1/webhooks/%C0%AF', '/api/v1/firmware/deployments/%E0%A4%A']) {
      expectProblem(await account.api.get(path), 400, 'malformed_request');
    }
    // Outside /api/v1 too, and whatever NODE_ENV says (Express's default handler shows stacks).
    const download = await account.api.get('/firmware/download/%C0%AF?e=1&s=x');
    expectProblem(download, 400, 'malformed_request');
    expect(typeof download.body).not.toBe('string');
  });

  it('treats an undecodable session cookie as no session: 401 on every API route and on /graphql', async () => {
    const cookie = { cookie: 'fleet_session=%E0%A4%A' };
    const anonymous = account.api.withKey('');
    const failures: string[] = [];
    for (const route of allRoutes(server.service.services)) {
      const path =
        '/api/v1' +
        route.path
          .replace(/:serial/g, 'NUL-1')
          .replace(/:id/g, '00000000-0000-4000-8000-000000000000')
          .replace(/:[a-zA-Z_]+/g, 'x');
      const res = await anonymous.request(route.method.toUpperCase(), path, {
        headers: { ...cookie, 'content-type': 'application/json' },
        ...(route.body ? { rawBody: '{}' } : {}),
      });
      if (
        res.status >= 500 ||
        (res.status >= 400 && !(res.headers.get('content-type') ?? '').startsWith('application/problem+json'))
      ) {
        failures.push(
          `${route.method.toUpperCase()} ${route.path}: ${res.status} ${JSON.stringify(res.body).slice(0, 120)}`,
        );
      }
      if (route.auth !== 'public' && res.status !== 401)
        failures.push(`${route.method.toUpperCase()} ${route.path}: ${res.status}, not 401`);
    }
    expect(failures).toEqual([]);
    const graph = await gql(url, '{ viewer { accountId } }', { cookie: cookie.cookie });
    expect(graph.status).toBe(401);
    expect(graph.body.errors[0].extensions.code).toBe('unauthenticated');
  });

  it('refuses NUL characters in GraphQL string arguments and variables with validation_failed, like REST', async () => {
    const cases: Array<[string, string, Record<string, unknown>]> = [
      [
        'filter text (variable)',
        'query($f: DeviceFilter) { devices(first: 5, filter: $f) { totalCount } }',
        { f: { text: 'a\u0000b' } },
      ],
      ['filter text (literal)', 'query { devices(first: 5, filter: { text: "a\\u0000b" }) { totalCount } }', {}],
      [
        'device name',
        'mutation($i: UpdateDeviceInput!) { updateDevice(serial: "NUL-1", input: $i) { name } }',
        { i: { name: 'lamp\u0000' } },
      ],
      [
        'tag key',
        'mutation($i: UpdateDeviceInput!) { updateDevice(serial: "NUL-1", input: $i) { name } }',
        { i: { tags: { 'k\u0000': 'v' } } },
      ],
      ['serial argument', 'query { device(serial: "NUL-1\\u0000") { serial } }', {}],
    ];
    for (const [label, query, variables] of cases) {
      const res = await gql(url, query, { apiKey: account.apiKey, variables });
      expect(res.body.errors?.[0]?.extensions?.code, `${label}: ${JSON.stringify(res.body)}`).toBe('validation_failed');
      expect(res.body.errors[0].extensions.errors[0].message).toBe('contains a NUL character');
      expect(res.body.data ?? null, label).toBeNull();
      expect(res.status, label).toBe(422);
    }
    const device = await account.api.get('/api/v1/devices/NUL-1');
    expect(device.body.name ?? null).not.toContain('\u0000');
  });

  it('refuses a lone UTF-16 surrogate the database cannot store with validation_failed over GraphQL, like REST', async () => {
    // PostgreSQL refuses it as data (22P02); REST answered 422, GraphQL internal_error (found by test/fuzz).
    const query = 'mutation($i: UpdateDeviceInput!) { updateDevice(serial: "NUL-1", input: $i) { name } }';
    for (const input of [{ tags: { a: '\ud800' } }, { name: 'a\ud800' }]) {
      const res = await gql(url, query, { apiKey: account.apiKey, variables: { i: input } });
      expect(res.body.errors?.[0]?.extensions?.code, JSON.stringify(res.body)).toBe('validation_failed');
    }
    const rest = await account.api.patch('/api/v1/devices/NUL-1', { tags: { a: '\ud800' } });
    expect(rest.status).toBe(422);
  });

  it('refuses NUL characters in subscription arguments over graphql-ws the same way', async () => {
    const client = wsClient(url, { apiKey: account.apiKey });
    try {
      const sub = collect(client, 'subscription($f: DeviceFilter) { deviceChanged(filter: $f) { type } }', {
        f: { text: '\u0000' },
      });
      await expect(sub.until(() => false, 2000)).rejects.toThrow(/ended/);
      expect(JSON.stringify(sub.errors)).toContain('validation_failed');
      expect(JSON.stringify(sub.errors)).toContain('contains a NUL character');
    } finally {
      await client.dispose();
    }
  });

  it('answers an upgrade request whose target is no URL with 400 and keeps serving', async () => {
    const { port } = new URL(url);
    const upgrade = (target: string) =>
      rawRequest(
        Number(port),
        `GET ${target} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
    // `new URL('//[', base)` throws; before the fix that throw ended the process.
    for (const target of ['//[', '//[::1', '//a:b@[x]/graphql']) {
      expect(await upgrade(target), target).toMatch(/^HTTP\/1\.1 400 /);
    }
    expect(await upgrade('/no-such-socket')).toMatch(/^HTTP\/1\.1 404 /);
    expect((await account.api.get('/healthz')).status).toBe(200);
  });
});

/** Sends one raw request and resolves with everything the server wrote until it closed. */
function rawRequest(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.setTimeout(5000, () => socket.destroy(new Error(`no answer to ${JSON.stringify(request.slice(0, 40))}`)));
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    socket.write(request);
  });
}
