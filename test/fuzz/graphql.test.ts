import fc from 'fast-check';
import { buildSchema, parse, validate } from 'graphql';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { FuzzService } from './harness/service-child';
import { FuzzRunner, fuzzSeed, stackLeak, type CaseResult } from './harness/fuzz';
import { request, seedDevices } from './harness/wire';
import { NASTY, hostileJson, nastyString, sometimes } from './harness/arbitraries';
import { ifStarted } from '../helpers/teardown';
import { loadTypeDefs } from '#api/graphql/schema-files';

/**
 * Fuzzes GraphQL over HTTP POST /graphql with an admin key: documents built from the schema's
 * list fields (nested `first` arguments as literals, as variables, omitted, of the wrong type,
 * huge), aliases, filters and orders, mutations with nested input objects whose maps carry
 * prototype keys (`constructor`, `__proto__`), and documents cut or spliced with garbage.
 * Never a 5xx, an `internal_error` or a stack trace. And one metamorphic property: a query whose
 * `first` values come in variables costs what the same query with those values written inline
 * costs, so either both are refused with `query_too_complex` or neither is (the limit cannot be
 * bypassed by moving page sizes into variables).
 */

/** A `first` argument as the fuzzer writes it. */
interface FirstArg {
  /** `last` is no argument of this schema: a validation error, never a cost. */
  name: 'first' | 'last';
  mode: 'absent' | 'literal' | 'variable' | 'omitted-variable';
  value: unknown;
  declared: string;
}

const INT32_MAX = 2 ** 31 - 1;
const isInt32 = (v: unknown): v is number =>
  Number.isInteger(v) && (v as number) >= -(2 ** 31) && (v as number) <= INT32_MAX;

const pageSize = fc.oneof(
  { arbitrary: fc.constantFrom(0, 1, 2, 20, 50, 499, 500, 501, 999, 1000, 1001), weight: 6 },
  { arbitrary: fc.constantFrom(-1, -(2 ** 31), INT32_MAX, 1_000_000_000), weight: 2 },
  { arbitrary: fc.integer({ min: 0, max: 5000 }), weight: 3 },
  {
    arbitrary: fc.constantFrom(2 ** 31, 2 ** 53, 1e300, 10.5, '10', '1e3', true, null, [10], { first: 10 }),
    weight: 1,
  },
);

const firstArg: fc.Arbitrary<FirstArg> = fc.record({
  name: fc.constantFrom<FirstArg['name']>(
    'first',
    'first',
    'first',
    'first',
    'first',
    'first',
    'first',
    'first',
    'first',
    'last',
  ),
  mode: fc.constantFrom<FirstArg['mode']>(
    'absent',
    'literal',
    'literal',
    'variable',
    'variable',
    'variable',
    'omitted-variable',
  ),
  value: pageSize,
  declared: fc.oneof(
    { arbitrary: fc.constantFrom('Int', 'Int!'), weight: 9 },
    { arbitrary: fc.constantFrom('String', 'Float', '[Int]', 'JSON', 'Boolean', 'ID'), weight: 1 },
  ),
});

/** A GraphQL literal for a JSON value (objects get unquoted keys). */
function literal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(literal).join(', ')}]`;
  const entries = Object.entries(v as Record<string, unknown>).filter(([k]) => /^[_A-Za-z][_0-9A-Za-z]*$/.test(k));
  return `{${entries.map(([k, x]) => `${k}: ${literal(x)}`).join(', ')}}`;
}

/** Renders the document twice: with variables as generated, and with every variable written inline. */
class Renderer {
  private n = 0;
  readonly defs: string[] = [];
  readonly variables: Record<string, unknown> = {};
  constructor(
    private readonly firsts: FirstArg[],
    private readonly inline: boolean,
  ) {}
  /** `first: …` for the next list field, or null when this one has none. */
  first(): string | null {
    const arg = this.firsts[this.n % this.firsts.length]!;
    const name = `v${this.n}`;
    this.n += 1;
    switch (arg.mode) {
      case 'absent':
        return null;
      case 'literal':
        return `${arg.name}: ${literal(arg.value)}`;
      case 'variable':
        if (this.inline) return `${arg.name}: ${literal(arg.value)}`;
        this.defs.push(`$${name}: ${arg.declared}`);
        this.variables[name] = arg.value;
        return `${arg.name}: $${name}`;
      case 'omitted-variable':
        if (this.inline) return null;
        this.defs.push(`$${name}: ${arg.declared}`);
        return `${arg.name}: $${name}`;
    }
  }
}

const args = (...list: Array<string | null>): string => {
  const present = list.filter((a): a is string => a !== null);
  return present.length ? `(${present.join(', ')})` : '';
};

const FILTERS = [
  null,
  '{ model: "LX-200" }',
  '{ status: online }',
  '{ text: "FZ" }',
  '{ text: "%_\\\\" }',
  '{ firmware: "1.0.0" }',
  '{ text: "\\u0000" }',
];
const ORDERS = [
  null,
  '{ field: SERIAL }',
  '{ field: FIRMWARE, direction: DESC }',
  '{ field: LAST_SEEN }',
  '{ field: IP }',
];

type Root = (r: Renderer, pick: number) => string;
const ROOTS: Root[] = [
  (r, p) =>
    `devices${args(r.first(), FILTERS[p % FILTERS.length] ? `filter: ${FILTERS[p % FILTERS.length]!}` : null, ORDERS[p % ORDERS.length] ? `orderBy: ${ORDERS[p % ORDERS.length]!}` : null)} ` +
    `{ totalCount quota pageInfo { hasNextPage endCursor } edges { cursor node { serial name status tags ` +
    `history${args(r.first())} { edges { cursor node { type data occurredAt } } pageInfo { hasNextPage } } } } }`,
  (r) =>
    `devices${args(r.first())} { edges { node { serial update { state progress } config { inSync desired { dimLevel } } ` +
    `history${args(r.first())} { edges { node { data } } } certificates { fingerprintSha256 } } } }`,
  (r) =>
    `deployments${args(r.first())} { edges { cursor node { id status counts { succeeded failed } ` +
    `updates${args(r.first())} { edges { node { serial state attempts } } pageInfo { endCursor } } } } }`,
  (r) => `events${args(r.first(), 'types: ["device.claimed", "x"]')} { id type occurredAt data }`,
  (r) =>
    `device(serial: "FZ-0001") { serial name history${args(r.first(), 'after: "x"')} { edges { cursor node { type } } } }`,
  () => 'viewer { principal role account { id name quota currency } apiKey { id name } }',
  (r) =>
    `webhookDeliveries${args('webhookId: "00000000-0000-4000-8000-000000000000"', r.first())} { edges { node { id } } }`,
  () => 'firmwareVersions(model: "LX-200") { id version size }',
  () => 'allocation { quota provisioned remaining }',
  (r) => `devices${args(r.first(), 'after: "bm90IGEgY3Vyc29y"')} { edges { node { serial } } }`,
];

interface QueryCase {
  roots: Array<{ root: number; alias: boolean; pick: number }>;
  firsts: FirstArg[];
  fragment: boolean;
  garble: { at: number; text: string } | null;
}

const queryCaseArb: fc.Arbitrary<QueryCase> = fc.record({
  roots: fc.array(fc.record({ root: fc.nat(ROOTS.length - 1), alias: fc.boolean(), pick: fc.nat(100) }), {
    minLength: 1,
    maxLength: 18,
  }),
  firsts: fc.array(firstArg, { minLength: 1, maxLength: 4 }),
  fragment: fc.boolean(),
  garble: sometimes(
    fc.record({
      at: fc.nat(),
      text: fc.oneof(nastyString(5), fc.constantFrom('{', '}', '(', '$', '...', '#', '"', '@skip')),
    }),
    0.1,
  ),
});

function renderQuery(c: QueryCase, inline: boolean): { query: string; variables: Record<string, unknown> } {
  const r = new Renderer(c.firsts, inline);
  const selections = c.roots.map(
    (s, i) => `${s.alias || c.roots.length > 1 ? `a${i}: ` : ''}${ROOTS[s.root]!(r, s.pick)}`,
  );
  let body = selections.join('\n  ');
  let fragment = '';
  if (c.fragment) {
    body = '...F';
    fragment = `\nfragment F on Query {\n  ${selections.join('\n  ')}\n}`;
  }
  let query = `query Fuzz${r.defs.length ? `(${r.defs.join(', ')})` : ''} {\n  ${body}\n}${fragment}`;
  if (c.garble) {
    const at = c.garble.at % (query.length + 1);
    query = query.slice(0, at) + c.garble.text + query.slice(at);
  }
  return { query, variables: r.variables };
}

/** The query's `first` values could be written inline unchanged: every variable an in-range Int. */
function wellTyped(c: QueryCase): boolean {
  if (c.garble) return false;
  return c.firsts.every((f) => {
    if (f.mode === 'absent') return true;
    if (f.name !== 'first') return false;
    if (f.mode === 'literal') return isInt32(f.value);
    if (f.mode === 'omitted-variable') return f.declared === 'Int';
    return (f.declared === 'Int' || f.declared === 'Int!') && isInt32(f.value);
  });
}

const SERIAL_POOL = [
  'constructor',
  '__proto__',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'toLocaleString',
  '__defineGetter__',
  '__lookupSetter__',
  'FZ-0001',
  'FZ-0002',
];

/** Serials: prototype names, already claimed ones, fresh valid ones, invalid ones. */
const serialArb = fc.oneof(
  { arbitrary: fc.constantFrom(...SERIAL_POOL), weight: 4 },
  { arbitrary: fc.stringMatching(/^GQ-[A-Z0-9]{6}$/), weight: 4 },
  { arbitrary: nastyString(20), weight: 1 },
);

const mapArb = (keys: fc.Arbitrary<string>, values: fc.Arbitrary<unknown>) =>
  fc.array(fc.tuple(keys, values), { maxLength: 5 }).map((pairs) => {
    // Own properties even for "__proto__" (what JSON.parse makes of a request body).
    const out: Record<string, unknown> = {};
    for (const [k, v] of pairs)
      Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    return out;
  });

interface MutationCase {
  query: string;
  variables: unknown;
}

const mutationCaseArb: fc.Arbitrary<MutationCase> = fc.oneof(
  {
    // Claims: fresh serials next to prototype-named ones, with names/csrs maps that cover some of
    // them. Mostly well-formed (a refused serial or field stops a claim before it reads the maps).
    arbitrary: fc
      .record({
        serials: fc.array(
          fc.oneof(
            { arbitrary: fc.stringMatching(/^GQ-[A-Z0-9]{6}$/), weight: 6 },
            { arbitrary: fc.constantFrom(...SERIAL_POOL), weight: 3 },
            { arbitrary: nastyString(20), weight: 1 },
          ),
          { minLength: 1, maxLength: 5 },
        ),
        proto: sometimes(fc.constantFrom(...SERIAL_POOL.slice(0, 10)), 0.6),
        extraKeys: sometimes(
          fc.array(fc.constantFrom(...SERIAL_POOL.slice(0, 10)), { minLength: 1, maxLength: 2 }),
          0.1,
        ),
        names: sometimes(fc.oneof(fc.constant('Hall 3'), nastyString(20)), 0.75),
        namedShare: fc.nat(4),
        csrs: sometimes(
          fc.constantFrom('not a PEM', '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----'),
          0.15,
        ),
        model: fc.oneof({ arbitrary: fc.constant('LX-200'), weight: 6 }, { arbitrary: nastyString(10), weight: 1 }),
        firmware: sometimes(fc.oneof(fc.constant('1.0.0'), nastyString(10)), 0.15),
        idempotencyKey: sometimes(nastyString(20), 0.25),
        aliases: fc.integer({ min: 1, max: 3 }),
      })
      .map((r) => {
        // A prototype-named serial last, so that the names (given for the first ones) leave it out.
        const serials = r.proto !== null ? [...r.serials, r.proto] : r.serials;
        const input: Record<string, unknown> = { serials, model: r.model };
        if (r.names !== null) {
          const named = serials.slice(0, Math.min(serials.length - 1, r.namedShare));
          const names: Record<string, unknown> = {};
          for (const s of [...named, ...(r.extraKeys ?? [])])
            Object.defineProperty(names, s, { value: r.names, enumerable: true, writable: true, configurable: true });
          input.names = names;
        }
        if (r.csrs !== null) input.csrs = { [serials[0]!]: r.csrs };
        if (r.firmware !== null) input.firmware = r.firmware;
        if (r.idempotencyKey !== null) input.idempotencyKey = r.idempotencyKey;
        const fields = Array.from(
          { length: r.aliases },
          (_, i) =>
            `c${i}: claimDevices(input: $i) { count devices { serial name } credentials { serial } charged { amount } }`,
        );
        return {
          query: `mutation Claim($i: ClaimDevicesInput!) {\n  ${fields.join('\n  ')}\n}`,
          variables: { i: input },
        };
      }),
    weight: 4,
  },
  {
    arbitrary: fc
      .record({
        serial: fc.constantFrom('FZ-0001', 'FZ-0002', 'constructor', 'nope', '__proto__'),
        name: sometimes(nastyString(30), 0.5),
        tags: sometimes(
          mapArb(
            fc.oneof(fc.constantFrom(...NASTY.slice(0, 30)), fc.string({ maxLength: 8 })),
            fc.oneof(nastyString(20), fc.constant(null), hostileJson),
          ),
          0.6,
        ),
        config: sometimes(
          fc.record(
            {
              heartbeatIntervalS: fc.oneof(
                fc.integer({ min: -10, max: 5000 }),
                fc.constantFrom(INT32_MAX, 2 ** 31, '10', null),
              ),
              dimLevel: fc.oneof(fc.integer({ min: -5, max: 105 }), fc.constant(1.5)),
              powerOnLevel: fc.integer({ min: -5, max: 105 }),
              timezone: fc.oneof(
                fc.constantFrom('Europe/Paris', 'UTC', 'Mars/Olympus', '../../etc/localtime', '+25:00'),
                nastyString(20),
              ),
              maintenanceWindow: fc.record({
                start: fc.oneof(fc.constantFrom('02:00', '24:00', '23:59', '2:0', '-1:00'), nastyString(6)),
                end: fc.oneof(fc.constantFrom('04:00', '00:00', '99:99'), nastyString(6)),
              }),
            },
            { requiredKeys: [] },
          ),
          0.5,
        ),
        extra: sometimes(fc.constantFrom('__proto__', 'constructor', 'unknownField'), 0.25),
      })
      .map((r) => {
        const input: Record<string, unknown> = {};
        if (r.name !== null) input.name = r.name;
        if (r.tags !== null) input.tags = r.tags;
        if (r.config !== null) input.config = r.config;
        if (r.extra !== null)
          Object.defineProperty(input, r.extra, {
            value: { x: 1 },
            enumerable: true,
            writable: true,
            configurable: true,
          });
        return {
          query:
            'mutation Update($s: String!, $u: UpdateDeviceInput!) { updateDevice(serial: $s, input: $u) { serial name tags config { desired { timezone maintenanceWindow { start end } } } } }',
          variables: { s: r.serial, u: input },
        };
      }),
    weight: 3,
  },
  {
    arbitrary: fc
      .tuple(
        fc.constantFrom(
          'mutation($i: RegisterModelInput!) { registerModel(input: $i) { id name } }',
          'mutation($i: CreateApiKeyInput!) { createApiKey(input: $i) { apiKey { id role } } }',
          'mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { webhook { id } } }',
          'mutation($i: DeployFirmwareInput!) { deployFirmware(input: $i) { id status } }',
          'query($i: DeployFirmwareInput!) { deployPreview(input: $i) { targetCount sampleSerials } }',
          'mutation($i: CreateUserInput!) { createUser(input: $i) { id email } }',
        ),
        fc.record(
          {
            name: nastyString(70),
            description: nastyString(30),
            role: fc.constantFrom('admin', 'viewer', 'root', '__proto__'),
            // Never a resolvable host name: the sandbox has no DNS to wait for.
            url: fc.constantFrom(
              'http://127.0.0.1:1/x',
              'https://[::1]/',
              'ftp://10.0.0.1/',
              'not a url',
              'http://169.254.169.254/',
              'http://0x7f.1/',
              'http://[',
              '',
            ),
            eventTypes: fc.array(
              fc.oneof(fc.constantFrom('device.online', 'firmware.update.failed'), nastyString(10)),
              { maxLength: 3 },
            ),
            firmwareVersion: fc.oneof(fc.constant('1.0.0'), nastyString(10)),
            filter: fc.record(
              {
                model: fc.constant('LX-200'),
                serials: fc.array(serialArb, { maxLength: 3 }),
                firmwareLt: nastyString(8),
              },
              { requiredKeys: [] },
            ),
            rollout: fc.record(
              {
                batches: fc.array(fc.oneof(fc.double({ noNaN: true }), fc.constantFrom(0, 50, 100, 1e308)), {
                  maxLength: 4,
                }),
                failureThresholdPercent: fc.double({ noNaN: true }),
                maxConcurrentPerTag: fc.record({ tag: nastyString(8), max: fc.integer() }),
                healthMaxReconnects: fc.integer(),
              },
              { requiredKeys: [] },
            ),
            scheduledAt: fc.constantFrom(
              '2026-01-01T00:00:00Z',
              '9999-12-31T23:59:59Z',
              'yesterday',
              '0000-00-00T00:00:00Z',
            ),
            email: fc.constantFrom('a@example.test', 'x', '@', `${'a'.repeat(300)}@example.test`),
            password: nastyString(30),
          },
          { requiredKeys: [] },
        ),
      )
      .map(([query, input]) => ({ query, variables: { i: input } })),
    weight: 2,
  },
  {
    // Variables of the wrong shape altogether.
    arbitrary: fc
      .tuple(
        fc.constantFrom(
          'mutation($i: ClaimDevicesInput!) { claimDevices(input: $i) { count } }',
          'query($f: DeviceFilter, $o: DeviceOrder) { devices(filter: $f, orderBy: $o) { totalCount } }',
          'query($s: String!) { device(serial: $s) { serial } }',
        ),
        fc.oneof(hostileJson, fc.constant('{"i": 1}'), fc.constant([1, 2])),
      )
      .map(([query, variables]) => ({ query, variables })),
    weight: 1,
  },
);

interface GqlAnswer {
  status: number | null;
  body: string;
  codes: string[];
  error?: string;
  localPort?: number;
}

async function postGraphql(port: number, apiKey: string, payload: unknown): Promise<GqlAnswer> {
  const res = await request(port, {
    method: 'POST',
    path: '/graphql',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  let codes: string[] = [];
  try {
    const parsed = JSON.parse(res.body) as { errors?: Array<{ extensions?: { code?: string } }> };
    codes = (parsed.errors ?? []).map((e) => e.extensions?.code ?? '?');
  } catch {
    // not JSON: judged by status
  }
  return {
    status: res.status,
    body: res.body,
    codes,
    ...(res.error ? { error: res.error } : {}),
    ...(res.localPort ? { localPort: res.localPort } : {}),
  };
}

/** No 5xx (503 only for readiness), no `internal_error`, no stack, an answer at all. */
function judgeGraphql(answer: GqlAnswer, sent: string): string[] {
  const problems: string[] = [];
  const show = `${answer.status ?? 'no status'} ${answer.body.slice(0, 1500)}`;
  if (answer.status === null) problems.push(`no answer (${answer.error ?? 'connection closed'})`);
  else if (answer.status >= 500 && !(answer.status === 503 && answer.codes.includes('service_unavailable')))
    problems.push(`answered ${show}`);
  if (answer.codes.includes('internal_error')) problems.push(`an internal_error: ${show}`);
  const leak = stackLeak(answer.body, sent);
  if (leak) problems.push(`the answer shows internals (${leak}): ${show}`);
  return problems;
}

const outcomeOf = (a: GqlAnswer): string => `${a.status ?? 'none'}${a.codes[0] ? ` ${a.codes[0]}` : ''}`;

describe('fuzz: GraphQL documents and variables over HTTP', () => {
  let service: FuzzService;
  let runner: FuzzRunner;

  beforeAll(async () => {
    service = await FuzzService.start();
    runner = new FuzzRunner(service, fuzzSeed());
    await seedDevices(service, ['FZ-0001', 'FZ-0002']);
  }, 180_000);
  afterAll(async () => ifStarted(service)?.close());

  it('builds documents the schema accepts (so that most cases get past validation)', () => {
    const schema = buildSchema(loadTypeDefs().join('\n'));
    for (let root = 0; root < ROOTS.length; root++) {
      for (let pick = 0; pick < Math.max(FILTERS.length, ORDERS.length); pick++) {
        const c: QueryCase = {
          roots: [{ root, alias: true, pick }],
          firsts: [{ name: 'first', mode: 'variable', value: 5, declared: 'Int' }],
          fragment: pick % 2 === 0,
          garble: null,
        };
        const errors = validate(schema, parse(renderQuery(c, false).query)).map((e) => e.message);
        expect(errors, `root ${root}, pick ${pick}`).toEqual([]);
      }
    }
  });

  it('costs page sizes from variables like the same values written inline', () => {
    const c: QueryCase = {
      roots: [{ root: 3, alias: false, pick: 0 }],
      firsts: [{ name: 'first', mode: 'variable', value: 7, declared: 'Int' }],
      fragment: false,
      garble: null,
    };
    expect(renderQuery(c, false)).toEqual({
      query:
        'query Fuzz($v0: Int) {\n  events(first: $v0, types: ["device.claimed", "x"]) { id type occurredAt data }\n}',
      variables: { v0: 7 },
    });
    expect(renderQuery(c, true).query).toContain('events(first: 7, ');
  });

  it(
    'answers fuzzed queries without a 5xx, and refuses too costly ones whatever carries the page sizes',
    { timeout: 600_000 },
    async () => {
      await runner.run({
        name: 'GraphQL queries with variables',
        runs: 300,
        batchSize: 50,
        arbitrary: queryCaseArb,
        show: (c) => {
          const v = renderQuery(c, false);
          return `POST /graphql ${JSON.stringify({ query: v.query, variables: v.variables })}`;
        },
        send: async (c) => {
          const v = renderQuery(c, false);
          const sent = JSON.stringify(v);
          const answer = await postGraphql(service.httpPort, service.apiKey, v);
          const problems = judgeGraphql(answer, sent);
          if (wellTyped(c) && problems.length === 0) {
            const inline = renderQuery(c, true);
            const literal = await postGraphql(service.httpPort, service.apiKey, inline);
            problems.push(...judgeGraphql(literal, JSON.stringify(inline)).map((p) => `with the values inline: ${p}`));
            const refused = (a: GqlAnswer) => a.codes.includes('query_too_complex');
            if (refused(literal) !== refused(answer)) {
              problems.push(
                `with variables ${outcomeOf(answer)} (${answer.codes.join(', ') || 'ran'}) but with the same values inline ` +
                  `${outcomeOf(literal)} (${literal.codes.join(', ') || 'ran'}): the cost limit must see the variables' values. ` +
                  `Inline document: ${inline.query.replace(/\s+/g, ' ')}`,
              );
            }
          }
          return {
            problems,
            clientPorts: answer.localPort ? [answer.localPort] : [],
            outcome: outcomeOf(answer),
          } satisfies CaseResult;
        },
      });
    },
  );

  it(
    'answers fuzzed mutations with nested inputs and prototype-named keys without a 5xx',
    { timeout: 600_000 },
    async () => {
      await runner.run({
        name: 'GraphQL mutations with nested input objects',
        runs: 300,
        batchSize: 50,
        arbitrary: mutationCaseArb,
        show: (c) => `POST /graphql ${JSON.stringify({ query: c.query, variables: c.variables })}`,
        send: async (c) => {
          const payload = { query: c.query, variables: c.variables };
          const answer = await postGraphql(service.httpPort, service.apiKey, payload);
          return {
            problems: judgeGraphql(answer, JSON.stringify(payload)),
            clientPorts: [],
            outcome: outcomeOf(answer),
          };
        },
      });
    },
  );
});
