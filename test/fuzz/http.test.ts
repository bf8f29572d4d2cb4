import fc from 'fast-check';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { FuzzService } from './harness/service-child';
import { FuzzRunner, fuzzSeed, judgeHttp, type CaseResult } from './harness/fuzz';
import { exchange, parseHttp, request, seedDevices, wsFrame } from './harness/wire';
import { asWire, bytesText, hostileJson, insertInto, nastyString, protoKeyed, sometimes } from './harness/arbitraries';
import { ifStarted } from '../helpers/teardown';

/**
 * Fuzzes the HTTP port below and around the routes: request lines no client library would
 * send, WebSocket upgrade requests to odd paths with odd handshakes, and well-formed requests
 * to every route carrying garbage headers, cookies and bodies whose length and type disagree.
 * Garbage is the caller's error (4xx); the service answers it, never with a 5xx or a stack
 * trace, and keeps serving (harness/fuzz.ts checks the process after every case and batch).
 */

const KNOWN_PATHS = [
  '/',
  '/healthz',
  '/readyz',
  '/metrics',
  '/graphql',
  '/mqtt',
  '/api/v1/devices',
  '/api/v1/devices/FZ-0001',
  '/api/v1/devices/claim',
  '/api/v1/firmware/versions',
  '/api/v1/firmware/deployments',
  '/api/v1/openapi.json',
  '/api/v1/session',
  '/api/v1/webhooks',
  '/api/v1/allocation',
  '/firmware/download/00000000-0000-4000-8000-000000000000?e=1&s=x',
  '/index.html',
  '/assets/index.js',
  '/settings/api-keys',
];

const PATH_PIECES = [
  '[',
  ']',
  '//',
  '//[',
  '%',
  '%%',
  '%zz',
  '%C0%AF',
  '%E0%A4%A',
  '%00',
  '%2e%2e/',
  '../',
  '\\',
  '@',
  ':',
  ';',
  '?',
  '??',
  '#',
  '*',
  '{',
  '}',
  '|',
  '^',
  '`',
  '"',
  '<',
  '>',
  '~',
  '&',
  '=',
  '+',
  ' ',
  '\t',
  '\u0000',
  '\u0001',
  '\u007f',
  '\u00ff',
  '\r',
  '\n',
  asWire('é'),
  asWire('😀'),
  '%F0%9F%98%80',
  '?a[b]=1&a[c][d]=2',
  '?__proto__[x]=1',
  '?constructor[prototype][x]=1',
];

const METHODS = [
  'GET',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'HEAD',
  'OPTIONS',
  'CONNECT',
  'TRACE',
  'PRI',
  'SOURCE',
  'QUERY',
  'PROPFIND',
  'M-SEARCH',
  'PURGE',
  'LINK',
  'get',
  'Get',
];

const VERSIONS = [
  'HTTP/1.1',
  'HTTP/1.1',
  'HTTP/1.1',
  'HTTP/1.0',
  'HTTP/2.0',
  'HTTP/0.9',
  'HTTP/1.2',
  'HTTP/3',
  'HTTP/1',
  'HTTP/1.1.1',
  'http/1.1',
  'HTTP/ 1.1',
  'HTTP/11',
  'HTTP/9.9',
  'RTSP/1.0',
  'ICE/1.0',
  '',
  'HTTP/1.1\u0000',
];

const targetArb: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: insertInto(fc.constantFrom(...KNOWN_PATHS), fc.constantFrom(...PATH_PIECES), 4), weight: 6 },
  {
    // absolute-form (and broken authority) targets
    arbitrary: fc
      .tuple(
        fc.constantFrom('http://', 'https://', 'ws://', 'HTTP://', 'ftp://', 'javascript:', '//', ''),
        fc.constantFrom(
          '127.0.0.1',
          'localhost:1',
          '[::1]',
          '[',
          '[::1',
          'a:b@[x]',
          'user@host',
          '%',
          '',
          'x'.repeat(300),
        ),
        fc.constantFrom(...KNOWN_PATHS, '', '?', '#x'),
      )
      .map(([scheme, host, path]) => scheme + host + path),
    weight: 2,
  },
  { arbitrary: fc.constantFrom('*', 'localhost:443', '[::1]:80', '', ' ', '/ /'), weight: 1 },
  {
    arbitrary: fc
      .tuple(
        fc.constantFrom(...KNOWN_PATHS),
        fc.constantFrom(1000, 8000, 17_000, 70_000),
        fc.constantFrom('a', '%', '/', '['),
      )
      .map(([p, n, c]) => p + c.repeat(n)),
    weight: 1,
  },
  { arbitrary: bytesText(60), weight: 1 },
);

const methodArb: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...METHODS), weight: 8 },
  { arbitrary: fc.stringMatching(/^[A-Z-]{1,12}$/), weight: 1 },
  { arbitrary: bytesText(8), weight: 1 },
  { arbitrary: fc.constant('G'.repeat(5000)), weight: 1 },
);

const eolArb = fc.constantFrom('\r\n', '\r\n', '\r\n', '\r\n', '\n', '\r');

interface RawCase {
  raw: string;
}

const requestLineArb: fc.Arbitrary<RawCase> = fc
  .record({
    method: methodArb,
    target: targetArb,
    version: fc.constantFrom(...VERSIONS),
    sep: fc.constantFrom(' ', ' ', ' ', ' ', '  ', '\t', ''),
    eol: eolArb,
    host: fc.constantFrom('Host: localhost', 'Host: localhost', 'Host: [', 'Host: ', '', 'Host: a\r\nHost: b'),
    connection: fc.constantFrom(
      'Connection: close',
      'Connection: close',
      'Connection: close',
      'Connection: keep-alive',
      '',
    ),
    body: sometimes(fc.string({ maxLength: 40 }), 0.25),
  })
  .map(({ method, target, version, sep, eol, host, connection, body }) => {
    const length = body !== null ? [`Content-Length: ${Buffer.byteLength(body)}`] : [];
    const headers = [host, connection, ...length].filter(Boolean);
    return {
      raw: `${method}${sep}${target}${sep}${version}${eol}${headers.map((h) => h + eol).join('')}${eol}${body ?? ''}`,
    };
  });

/** A Sec-WebSocket-Key as RFC 6455 wants it (16 bytes, base64), or not. */
const wsKeyArb = fc.oneof(
  {
    arbitrary: fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => Buffer.from(b).toString('base64')),
    weight: 5,
  },
  { arbitrary: nastyString(30), weight: 2 },
  { arbitrary: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString('base64')), weight: 1 },
);

const UPGRADE_PATHS = [
  '/graphql',
  '/graphql',
  '/mqtt',
  '/mqtt',
  '//[',
  '//',
  '//[::1',
  '//a:b@[x]/graphql',
  '/graphql?x=1',
  '/graphql/',
  '//graphql',
  '/GRAPHQL',
  '/mqtt/',
  '/mqtt?',
  '%',
  '/%',
  '/%zz',
  'http://localhost/graphql',
  'http://[',
  '*',
  '/',
  '/api/v1/devices',
  '/healthz',
];

interface UpgradeCase {
  raw: string;
  frames: string[];
  settleMs: number;
}

function upgradeArb(apiKey: string): fc.Arbitrary<UpgradeCase> {
  const gqlMessage = fc.oneof(
    fc.constant(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${apiKey}` } })),
    nastyString(20).map((a) => JSON.stringify({ type: 'connection_init', payload: { authorization: a } })),
    fc.constant(JSON.stringify({ type: 'ping' })),
    fc
      .tuple(
        nastyString(8),
        fc.constantFrom(
          'subscription { deviceChanged { type device { serial } } }',
          'subscription { deviceChanged(filter: { text: "\\u0000" }) { type } }',
          '{ viewer { accountId } }',
          'mutation { registerModel(input: { name: "WS" }) { name } }',
          'subscription {',
          '',
        ),
        hostileJson,
      )
      .map(([id, query, variables]) => JSON.stringify({ id, type: 'subscribe', payload: { query, variables } })),
    fc.constant(JSON.stringify({ type: 'complete', id: '1' })),
    hostileJson.map((v) => JSON.stringify(v)),
    bytesText(30),
  );
  return fc
    .record({
      // Half the cases a proper handshake to /graphql or /mqtt (what the other fields say about
      // method, path and handshake headers is then overridden), so that the frames reach a socket.
      proper: sometimes(
        fc.record({
          path: fc.constantFrom('/graphql', '/mqtt'),
          key: fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => Buffer.from(b).toString('base64')),
        }),
        0.5,
      ),
      method: fc.constantFrom('GET', 'GET', 'GET', 'GET', 'POST', 'PUT', 'HEAD', 'OPTIONS'),
      path: fc.oneof(
        { arbitrary: fc.constantFrom(...UPGRADE_PATHS), weight: 4 },
        { arbitrary: insertInto(fc.constantFrom(...UPGRADE_PATHS), fc.constantFrom(...PATH_PIECES), 2), weight: 2 },
      ),
      connection: fc.constantFrom(
        'Upgrade',
        'Upgrade',
        'upgrade',
        'keep-alive, Upgrade',
        'Upgrade, HTTP2-Settings',
        null,
      ),
      upgrade: fc.constantFrom(
        'websocket',
        'websocket',
        'websocket',
        'WebSocket',
        'websocket, h2c',
        'h2c',
        'mqtt',
        '',
        null,
      ),
      key: sometimes(wsKeyArb, 0.85),
      version: sometimes(fc.constantFrom('13', '13', '13', '8', '', 'abc', '13, 8', '99999999999999999999'), 0.85),
      protocol: sometimes(
        fc.constantFrom(
          'graphql-transport-ws',
          'graphql-ws',
          'mqtt',
          'mqttv3.1',
          'mqtt, graphql-transport-ws',
          ',,',
          '\u00ff',
        ),
        0.5,
      ),
      origin: sometimes(
        fc.constantFrom('http://localhost', 'null', 'http://evil.example', '[', 'http://127.0.0.1:1'),
        0.5,
      ),
      cookie: sometimes(
        nastyString(30).map((v) => `fleet_session=${v}`),
        0.3,
      ),
      auth: sometimes(
        fc.oneof(
          fc.constant(`Bearer ${apiKey}`),
          nastyString(30).map((v) => `Bearer ${v}`),
        ),
        0.4,
      ),
      extensions: sometimes(
        fc.constantFrom('permessage-deflate; client_max_window_bits', 'permessage-deflate; x=%', ';;'),
        0.25,
      ),
      frames: fc.array(gqlMessage, { maxLength: 3 }),
      garbage: sometimes(bytesText(40), 0.25),
      settleMs: fc.constantFrom(0, 0, 20, 100),
    })
    .map((r) => {
      if (r.proper) {
        Object.assign(r, {
          method: 'GET',
          path: r.proper.path,
          connection: 'Upgrade',
          upgrade: 'websocket',
          key: r.proper.key,
          version: '13',
          protocol: r.proper.path === '/graphql' ? 'graphql-transport-ws' : 'mqtt',
        });
      }
      const headers = [
        'Host: localhost',
        r.connection !== null ? `Connection: ${r.connection}` : '',
        r.upgrade !== null ? `Upgrade: ${r.upgrade}` : '',
        r.key !== null ? `Sec-WebSocket-Key: ${asWire(r.key)}` : '',
        r.version !== null ? `Sec-WebSocket-Version: ${r.version}` : '',
        r.protocol !== null ? `Sec-WebSocket-Protocol: ${asWire(r.protocol)}` : '',
        r.origin !== null ? `Origin: ${r.origin}` : '',
        r.cookie !== null ? `Cookie: ${asWire(r.cookie)}` : '',
        r.auth !== null ? `Authorization: ${asWire(r.auth)}` : '',
        r.extensions !== null ? `Sec-WebSocket-Extensions: ${r.extensions}` : '',
      ].filter(Boolean);
      const frames = [...r.frames.map(asWire), ...(r.garbage !== null ? [r.garbage] : [])];
      return {
        raw: `${r.method} ${r.path} HTTP/1.1\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`,
        frames,
        settleMs: r.settleMs,
      };
    });
}

interface HeaderCase {
  method: string;
  path: string;
  headers: string[];
  body: string;
  /** The body is framed to need more bytes than sent: the client gives up at once. */
  incomplete: boolean;
}

interface Route {
  method: string;
  path: string;
}

function headerCaseArb(routes: Route[], apiKey: string): fc.Arbitrary<HeaderCase> {
  const param = fc.oneof(
    fc.constantFrom('FZ-0001', 'FZ-0002', '00000000-0000-4000-8000-000000000000', 'constructor', '__proto__'),
    nastyString(20).map((s) => encodeURIComponent(Buffer.from(s).toString())),
    fc.constantFrom('%C0%AF', '%', '[', '..'),
  );
  const target = fc.oneof(
    {
      arbitrary: fc.tuple(fc.constantFrom(...routes), param, param).map(([r, a, b]) => ({
        method: r.method.toUpperCase(),
        path: `/api/v1${r.path.replace(/\{[^}]+\}/, a).replace(/\{[^}]+\}/g, b)}`,
      })),
      weight: 6,
    },
    {
      arbitrary: fc.constantFrom(
        { method: 'POST', path: '/graphql' },
        { method: 'GET', path: '/graphql?query=%7Bviewer%7BaccountId%7D%7D' },
        { method: 'GET', path: '/healthz' },
        { method: 'GET', path: '/firmware/download/00000000-0000-4000-8000-000000000000?e=9999999999&s=abc' },
        { method: 'GET', path: '/metrics' },
        { method: 'POST', path: '/api/v1/session' },
        { method: 'GET', path: '/' },
      ),
      weight: 2,
    },
  );
  const authorization = fc.oneof(
    fc.constant(`Bearer ${apiKey}`),
    fc.constant(`bearer ${apiKey}`),
    fc.constant(`Bearer ${apiKey}x`),
    nastyString(40).map((v) => `Bearer ${v}`),
    nastyString(40).map((v) => `Bearer flk_${v}`),
    nastyString(40).map((v) => `Basic ${Buffer.from(v).toString('base64')}`),
    fc.constantFrom('Bearer', 'Bearer ', '', 'Basic', 'Digest x', `Bearer ${'a'.repeat(10_000)}`),
    nastyString(40),
  );
  const cookie = fc.oneof(
    nastyString(60).map((v) => `fleet_session=${v}`),
    fc
      .tuple(nastyString(20), nastyString(20))
      .map(([a, b]) => `fleet_session=${a}; fleet_session=${b}; fleet_csrf=${a}`),
    fc.constantFrom(
      'fleet_session=%E0%A4%A',
      'fleet_session="',
      'fleet_session',
      '=; ;',
      ';;;;',
      `fleet_session=${'%'.repeat(5000)}`,
      '__proto__=1; constructor=2',
    ),
    nastyString(60),
  );
  const contentType = fc.constantFrom(
    'application/json',
    'application/json',
    'application/json; charset=utf-16',
    'application/json; charset=x-garbage',
    'application/json; charset=utf-8; charset=latin1',
    'text/plain',
    'multipart/form-data',
    'multipart/form-data; boundary=',
    'multipart/form-data; boundary=x',
    'application/x-www-form-urlencoded',
    'application/graphql',
    'application/graphql-response+json',
    '*/*',
    '',
    ';',
    'application/problem+json',
    'application/json; q=%',
  );
  const body = fc.oneof(
    hostileJson.map((v) => asWire(JSON.stringify(v))),
    protoKeyed(hostileJson).map(asWire),
    fc.constantFrom(
      '',
      '{',
      '{"serials":["constructor","FZ-9"],"model":"LX-200","names":{"FZ-9":"a"}}',
      '{"query":"{ viewer { accountId } }","variables":{"__proto__":{"x":1}}}',
      'a=1&b[c]=2&__proto__[x]=1',
      '\u001f\u008b\u0008\u0000garbage',
    ),
    bytesText(80),
  );
  // How the body is framed: matching, lying or conflicting lengths, chunked (well-formed or not).
  const framing = fc.constantFrom(
    'length',
    'length',
    'length',
    'length+',
    'length-',
    'length-garbage',
    'length-twice',
    'chunked',
    'chunked-bad',
    'chunked+length',
    'none',
  );
  const extra = fc.array(
    fc.oneof(
      fc.constantFrom(
        'Content-Encoding: gzip',
        'Content-Encoding: deflate',
        'Content-Encoding: br',
        'Content-Encoding: x-garbage',
        'Expect: 100-continue',
        'Expect: garbage',
        'X-Forwarded-For: [',
        'X-Forwarded-For: 1.2.3.4, ::1, garbage',
        'X-Forwarded-Proto: gopher',
        'X-Forwarded-Host: [',
        'Idempotency-Key: ' + 'k'.repeat(300),
        'Range: bytes=garbage',
        'Range: bytes=-1-2,5-',
        'If-None-Match: *',
        'Accept: */*;q=garbage',
        'Accept-Encoding: gzip;q=2, br;q=NaN',
        'Origin: null',
        'X-CSRF-Token: %',
        'Transfer-Encoding: identity',
        'Host: [',
        'Connection: keep-alive, Upgrade',
      ),
      fc
        .tuple(fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/), nastyString(30))
        .map(([name, value]) => `${name}: ${asWire(value)}`),
      nastyString(20).map((v) => `Idempotency-Key: ${asWire(v)}`),
      nastyString(20).map((v) => `X-Forwarded-For: ${asWire(v)}`),
    ),
    { maxLength: 4 },
  );
  return fc
    .record({
      target,
      authorization: sometimes(authorization, 0.7),
      cookie: sometimes(cookie, 0.5),
      contentType: sometimes(contentType, 0.85),
      body,
      framing,
      delta: fc.integer({ min: 1, max: 50 }),
      extra,
    })
    .map((r) => {
      const headers = ['Host: localhost', 'Connection: close'];
      if (r.authorization !== null) headers.push(`Authorization: ${asWire(r.authorization)}`);
      if (r.cookie !== null) headers.push(`Cookie: ${asWire(r.cookie)}`);
      if (r.contentType !== null) headers.push(`Content-Type: ${r.contentType}`);
      headers.push(...r.extra);
      let body = r.body;
      const n = Buffer.byteLength(body, 'latin1');
      switch (r.framing) {
        case 'length':
          headers.push(`Content-Length: ${n}`);
          break;
        case 'length+':
          headers.push(`Content-Length: ${n + r.delta}`);
          break;
        case 'length-':
          headers.push(`Content-Length: ${Math.max(0, n - r.delta)}`);
          break;
        case 'length-garbage':
          headers.push(
            `Content-Length: ${['abc', '-1', '1e3', ' 5', '0x10', '', '99999999999999999999'][r.delta % 7]!}`,
          );
          break;
        case 'length-twice':
          headers.push(`Content-Length: ${n}`, `Content-Length: ${n + r.delta}`);
          break;
        case 'chunked':
          headers.push('Transfer-Encoding: chunked');
          body = n > 0 ? `${n.toString(16)}\r\n${body}\r\n0\r\n\r\n` : '0\r\n\r\n';
          break;
        case 'chunked-bad':
          headers.push('Transfer-Encoding: chunked');
          body = `${(n + r.delta).toString(16)}zz\r\n${body}\r\n`;
          break;
        case 'chunked+length':
          headers.push('Transfer-Encoding: chunked', `Content-Length: ${n}`);
          body = `${n.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
          break;
        case 'none':
          break;
      }
      const incomplete = r.framing === 'length+' || r.framing === 'chunked-bad';
      return { method: r.target.method, path: asWire(r.target.path), headers, body, incomplete };
    });
}

const rawText = (c: HeaderCase): string =>
  `${c.method} ${c.path} HTTP/1.1\r\n${c.headers.map((h) => `${h}\r\n`).join('')}\r\n${c.body}`;

/** Sends one raw request and judges the answer. */
async function sendRaw(
  port: number,
  raw: string,
  options: { rest?: Buffer[]; settleMs?: number; giveUp?: boolean; portalEtag?: string | undefined } = {},
): Promise<CaseResult> {
  const ex = await exchange(port, Buffer.from(raw, 'latin1'), {
    // A client that waits for the answer (and half-closes after 0.5 s of silence), or one that
    // knows its request cannot complete and half-closes at once.
    after: options.giveUp || options.rest ? 'end' : 'end-when-idle',
    idleMs: 500,
    timeoutMs: 10_000,
    ...(options.rest ? { rest: options.rest, ready: (d: Buffer) => d.includes('\r\n\r\n') } : {}),
    ...(options.settleMs ? { settleMs: options.settleMs } : {}),
  });
  const answer = parseHttp(ex.data);
  const problems = judgeHttp(answer, raw, options.portalEtag);
  if (ex.end === 'timeout')
    problems.push(
      'the service kept the connection open for seconds after the client had sent everything and closed its side',
    );
  const outcome =
    answer.status === 503
      ? `503 ${answer.body.slice(0, 60)}` // the portal not built, readiness: allowed
      : answer.status !== null
        ? String(answer.status)
        : ex.error
          ? `closed (${ex.error})`
          : 'closed without answer';
  return { problems, clientPorts: ex.localPort ? [ex.localPort] : [], outcome };
}

describe('fuzz: HTTP request lines, upgrades, headers and cookies', () => {
  let service: FuzzService;
  let runner: FuzzRunner;
  let routes: Route[];
  /** ETag of the portal's "not built yet" 503 page, when this checkout has no portal build. */
  let portalEtag: string | undefined;

  beforeAll(async () => {
    service = await FuzzService.start();
    runner = new FuzzRunner(service, fuzzSeed());
    const spec = await request(service.httpPort, { method: 'GET', path: '/api/v1/openapi.json' });
    const paths = (JSON.parse(spec.body) as { paths: Record<string, Record<string, unknown>> }).paths;
    routes = Object.entries(paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => ({ method, path })));
    const portal = await request(service.httpPort, { method: 'GET', path: '/' });
    if (portal.status === 503 && portal.body.includes('not been built')) portalEtag = String(portal.headers.etag);
    await seedDevices(service, ['FZ-0001', 'FZ-0002']);
  }, 180_000);
  afterAll(async () => ifStarted(service)?.close());

  it('has the routes of the OpenAPI document to aim at', () => {
    expect(routes.length).toBeGreaterThan(20);
  });

  it('answers malformed request lines with a 4xx (or closes) and keeps serving', { timeout: 600_000 }, async () => {
    await runner.run({
      name: 'malformed request lines',
      runs: 400,
      batchSize: 50,
      arbitrary: requestLineArb,
      show: (c) => `raw request (latin1) ${JSON.stringify(c.raw)}`,
      send: (c) => sendRaw(service.httpPort, c.raw, { portalEtag }),
    });
  });

  it(
    'answers odd WebSocket upgrade requests without crashing or holding the socket',
    { timeout: 600_000 },
    async () => {
      await runner.run({
        name: 'upgrade requests',
        runs: 300,
        batchSize: 50,
        arbitrary: upgradeArb(service.apiKey),
        show: (c) =>
          `raw request (latin1) ${JSON.stringify(c.raw)}` +
          (c.frames.length ? `, then WebSocket text frames (latin1) ${JSON.stringify(c.frames)}` : '') +
          (c.settleMs ? `, closing after ${c.settleMs} ms` : ''),
        send: (c) =>
          sendRaw(service.httpPort, c.raw, {
            rest: c.frames.map((f) => wsFrame(Buffer.from(f, 'latin1'))),
            settleMs: c.settleMs,
            portalEtag,
          }),
      });
    },
  );

  it(
    'answers garbage headers, cookies and mismatched bodies with a 4xx, never a 5xx',
    { timeout: 600_000 },
    async () => {
      await runner.run({
        name: 'headers, cookies and body framing',
        runs: 400,
        batchSize: 50,
        arbitrary: headerCaseArb(routes, service.apiKey),
        show: (c) => `raw request (latin1) ${JSON.stringify(rawText(c))}`,
        send: (c) => sendRaw(service.httpPort, rawText(c), { giveUp: c.incomplete, portalEtag }),
      });
    },
  );
});
