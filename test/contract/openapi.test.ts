import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { z } from 'zod';
import { generateKeyPairSync, sign } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { ApiClient, type ApiResponse } from '../helpers/api-client';
import { allRoutes } from '#rest/routes/index';
import type { RouteDef } from '#rest/route';
import { buildFirmwareVersion, serials, setReported } from '../helpers/factories';
import { makeCsr } from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

/**
 * The OpenAPI document is the contract: every route the server registers is in it, and every
 * response these tests receive validates against what it documents for that status. Generic over
 * the route table, so routes added by any area are covered without editing this file: each route
 * is called without credentials (401), each parameterless GET with a key, each GET with path
 * parameters with unknown ids (404), plus a device scenario that reaches the success answers.
 */

type Json = Record<string, unknown>;
const DOC_PATH = (route: Pick<RouteDef, 'path'>) => '/api/v1' + route.path.replace(/:([A-Za-z_]+)/g, '{$1}');
const UNKNOWN_PARAM: Record<string, string> = { serial: 'NO-SUCH-SERIAL', id: '00000000-0000-4000-8000-000000000000' };
const concretePath = (route: RouteDef, values: Record<string, string> = {}) =>
  '/api/v1' +
  route.path.replace(/:([A-Za-z_]+)/g, (_, name: string) =>
    encodeURIComponent(values[name] ?? UNKNOWN_PARAM[name] ?? 'x'),
  );

describe('OpenAPI document matches the server', () => {
  let server: TestServer;
  let account: TestAccount;
  let doc: Json & { paths: Record<string, Record<string, Json>>; components: { schemas: Record<string, Json> } };
  let routes: RouteDef[];
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  const compiled = new Map<string, ValidateFunction>();
  const checked = new Set<string>();

  /** Validates one received response against the document; returns the errors (empty = valid). */
  function conformance(route: RouteDef, res: ApiResponse): string[] {
    const operation = doc.paths[DOC_PATH(route)]?.[route.method] as { responses: Record<string, Json> } | undefined;
    if (!operation) return [`${route.method} ${route.path} is not documented`];
    const documented = operation.responses[String(res.status)] ?? operation.responses.default;
    if (!documented) return [`${route.method} ${route.path}: status ${res.status} is not documented`];
    checked.add(`${route.method} ${route.path} ${res.status}`);
    const content = documented.content as Record<string, { schema?: Json }> | undefined;
    const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
    if (!content)
      return res.body === '' || res.body === undefined
        ? []
        : [`${route.method} ${route.path} ${res.status}: body not documented`];
    const media = content[type];
    if (!media)
      return [
        `${route.method} ${route.path} ${res.status}: content type ${type} not documented (${Object.keys(content).join(', ')})`,
      ];
    if (!media.schema) return [];
    const key = `${route.method} ${route.path} ${res.status in operation.responses ? res.status : 'default'} ${type}`;
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.compile(
        JSON.parse(JSON.stringify(media.schema).replaceAll('"#/components/schemas/', '"components#/$defs/')),
      );
      compiled.set(key, validate);
    }
    return validate(res.body)
      ? []
      : [`${route.method} ${route.path} ${res.status}: ${ajv.errorsText(validate.errors)}`];
  }

  const find = (method: string, path: string): RouteDef => {
    const route = routes.find((r) => r.method === method && r.path === path);
    if (!route) throw new Error(`no route ${method} ${path}`);
    return route;
  };

  /** Calls a route and checks the answer against the document. */
  async function call(
    client: ApiClient,
    method: string,
    path: string,
    options: { params?: Record<string, string>; query?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) {
    const route = find(method, path);
    const res = await client.request(
      method.toUpperCase(),
      concretePath(route, options.params) + (options.query ? `?${options.query}` : ''),
      {
        ...(options.body !== undefined ? { body: options.body } : {}),
        ...(options.headers ? { headers: options.headers } : {}),
      },
    );
    expect(conformance(route, res)).toEqual([]);
    return res;
  }

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount({ quota: 100 });
    await server.service.services.apiKeys.setRateLimit(account.apiKeyId, 100_000);
    routes = [...allRoutes(server.service.services)];
    const res = await new ApiClient(server.service.httpUrl).get('/api/v1/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
    ajv.addSchema({
      $id: 'components',
      $defs: JSON.parse(
        JSON.stringify(doc.components.schemas).replaceAll('"#/components/schemas/', '"components#/$defs/'),
      ),
    });
    // Embedded database start and seeding claims can be slow on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it('is OpenAPI 3.1 and documents every registered route, and only those', () => {
    expect(doc.openapi).toBe('3.1.0');
    const registered = new Set([...routes.map((r) => `${r.method} ${DOC_PATH(r)}`), 'get /api/v1/openapi.json']);
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)),
    );
    expect([...registered].filter((r) => !documented.has(r))).toEqual([]);
    expect([...documented].filter((d) => !registered.has(d))).toEqual([]);
    for (const required of [
      'get /api/v1/devices',
      'get /api/v1/devices/{serial}',
      'post /api/v1/devices/claim',
      'patch /api/v1/devices/{serial}',
      'get /api/v1/allocation',
      'get /api/v1/models',
    ]) {
      expect(documented).toContain(required);
    }
    const ids = routes.map((r) => r.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('every documented schema compiles', { timeout: 60_000 }, () => {
    for (const route of routes) {
      const operation = doc.paths[DOC_PATH(route)]![route.method] as {
        responses: Record<string, { content?: Record<string, { schema?: Json }> }>;
        requestBody?: { content: Record<string, { schema?: Json }> };
      };
      const schemas = [
        ...Object.values(operation.responses).flatMap((r) => Object.values(r.content ?? {}).map((c) => c.schema)),
        ...Object.values(operation.requestBody?.content ?? {}).map((c) => c.schema),
      ].filter((s): s is Json => s !== undefined);
      for (const schema of schemas)
        expect(() =>
          ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"components#/$defs/'))),
        ).not.toThrow();
    }
  });

  it('every named schema (component) means one thing: no two schemas share an id', () => {
    // zod's registry keeps the last schema registered under an id; the document would then
    // silently describe another area's shape under that name.
    const seen = new Map<string, Set<string>>();
    const collect = (schema: z.ZodType | undefined, io: 'input' | 'output') => {
      if (!schema) return;
      const json = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as { $defs?: Record<string, unknown> };
      for (const [name, def] of Object.entries(json.$defs ?? {})) {
        const variants = seen.get(name) ?? new Set<string>();
        variants.add(JSON.stringify(def));
        seen.set(name, variants);
      }
    };
    for (const route of routes) {
      collect(route.params, 'input');
      collect(route.query, 'input');
      collect(route.body, 'input');
      for (const spec of Object.values(route.responses)) collect(spec.schema, 'output');
    }
    expect([...seen].filter(([, variants]) => variants.size > 1).map(([name]) => name)).toEqual([]);
  });

  it('every authenticated route answers 401 without a key, as documented', async () => {
    const anonymous = new ApiClient(server.service.httpUrl);
    for (const route of routes.filter((r) => r.auth !== 'public')) {
      const res = await anonymous.request(
        route.method.toUpperCase(),
        concretePath(route),
        route.body ? { body: {} } : {},
      );
      expect(res.status, `${route.method} ${route.path}`).toBe(401);
      expect(conformance(route, res)).toEqual([]);
    }
  });

  it('every GET route answers as documented (lists with a key, unknown ids as 404)', async () => {
    for (const route of routes.filter((r) => r.method === 'get')) {
      const res = await account.api.get(concretePath(route));
      expect(res.status, `${route.method} ${route.path}: ${JSON.stringify(res.body).slice(0, 200)}`).toBeLessThan(500);
      expect(conformance(route, res)).toEqual([]);
    }
  });

  it(
    'device, model, claim and allocation answers validate (success and error bodies)',
    { timeout: 120_000 },
    async () => {
      const api = account.api;
      await call(api, 'post', '/models', { body: { name: 'LX-200', description: 'Downlight' } });
      await call(api, 'post', '/models', { body: { name: 'LX-200' } }); // 409
      await buildFirmwareVersion(server, { accountId: account.accountId, model: 'LX-200', version: '1.4.2' });
      await call(api, 'get', '/models');
      const claim = await call(api, 'post', '/devices/claim', {
        body: { serials: serials('C', 5), model: 'LX-200', firmware: '1.4.2' },
        headers: { 'Idempotency-Key': 'contract-1' },
      });
      expect(claim.status).toBe(201);
      await call(api, 'post', '/devices/claim', {
        body: { serials: serials('C', 5), model: 'LX-200', firmware: '1.4.2' },
        headers: { 'Idempotency-Key': 'contract-1' },
      }); // replay
      await call(api, 'post', '/devices/claim', { body: { serial: 'S-1', name: 'Single', model: 'LX-200' } });
      await call(api, 'post', '/devices/claim', { body: { serials: ['C-0001', 'bad one'], model: 'LX-200' } }); // 422 claim_rejected
      await call(api, 'post', '/devices/claim', { body: { serials: serials('Z', 200), model: 'LX-200' } }); // 422 quota
      await call(api, 'post', '/devices/claim', { body: { serials: ['Q-1'], model: 'NOPE' } }); // 422 unknown_model
      await setReported(server.service.database.knex, {
        accountId: account.accountId,
        serials: ['C-0001'],
        state: { firmware: '1.4.0', status: 'online', ip: '10.0.0.1', lastSeen: new Date() },
      });
      await server.service.database
        .knex('devices')
        .where({ serial: 'C-0001' })
        .update({
          reported_config: JSON.stringify({ dim_level: 100, vendor_extra: true }),
          reported_config_version: 1,
        });
      await call(api, 'get', '/devices', { query: 'limit=2' });
      await call(api, 'get', '/devices', { query: 'model=LX-200&firmware_lt=2.0.0&limit=10' });
      await call(api, 'get', '/devices');
      await call(api, 'get', '/devices', { query: 'limit=0' }); // 422
      await call(api, 'get', '/devices/:serial', { params: { serial: 'C-0001' } });
      await call(api, 'patch', '/devices/:serial', {
        params: { serial: 'C-0002' },
        body: { name: 'Hall', tags: { a: 'b' }, config: { maintenance_window: { start: '01:00', end: '03:00' } } },
      });
      await call(api, 'patch', '/devices/:serial', { params: { serial: 'C-0002' }, body: { status: 'online' } }); // 422
      await call(api, 'get', '/devices/:serial/history', { params: { serial: 'C-0002' }, query: 'limit=1' });
      await call(api, 'post', '/devices/:serial/credentials', { params: { serial: 'C-0003' } });
      await call(api, 'post', '/devices/:serial/credentials', {
        params: { serial: 'C-0003' },
        body: { mode: 'in_band', grace_s: 86_400 },
      }); // 202
      await call(api, 'post', '/devices/:serial/credentials', {
        params: { serial: 'C-0003' },
        body: { mode: 'in_band', grace_s: 1 },
      }); // 422
      await call(api, 'delete', '/devices/:serial', { params: { serial: 'C-0004' } });
      await call(api, 'delete', '/devices/:serial', { params: { serial: 'C-0004' } }); // 404
      await call(api, 'get', '/allocation');
      // Device certificates: the CA, a claim carrying CSRs, issue, list, revoke, refusals.
      await call(api, 'get', '/device-ca');
      await call(api, 'post', '/devices/claim', {
        body: { serials: ['CC-1'], model: 'LX-200', csrs: { 'CC-1': (await makeCsr()).pem } },
      });
      await call(api, 'post', '/devices/claim', {
        body: { serials: ['CC-2'], model: 'LX-200', csrs: { 'CC-2': 'not a csr' } },
      }); // 422 csr_invalid
      const issued = await call(api, 'post', '/devices/:serial/certificates', {
        params: { serial: 'C-0005' },
        body: { csr: (await makeCsr({ type: 'Ed25519' })).pem },
      });
      await call(api, 'post', '/devices/:serial/certificates', { params: { serial: 'C-0005' }, body: { csr: 'nope' } }); // 422
      await call(api, 'get', '/devices/:serial/certificates', { params: { serial: 'C-0005' } });
      await call(api, 'delete', '/devices/:serial/certificates/:fingerprint', {
        params: { serial: 'C-0005', fingerprint: issued.body.fingerprint_sha256 },
      });
      await call(api, 'delete', '/devices/:serial/certificates/:fingerprint', {
        params: { serial: 'C-0005', fingerprint: '0'.repeat(64) },
      }); // 404
      for (const expected of [
        'get /device-ca 200',
        'post /devices/:serial/certificates 201',
        'post /devices/:serial/certificates 422',
        'get /devices/:serial/certificates 200',
        'delete /devices/:serial/certificates/:fingerprint 200',
        'delete /devices/:serial/certificates/:fingerprint 404',
      ]) {
        expect(checked).toContain(expected);
      }
      for (const expected of [
        'post /devices/claim 201',
        'post /devices/claim 422',
        'get /devices 200',
        'patch /devices/:serial 200',
        'delete /devices/:serial 204',
        'get /allocation 200',
      ]) {
        expect(checked).toContain(expected);
      }
    },
  );

  it('firmware signing key answers validate (none, registered, refused)', async () => {
    const api = account.api;
    await call(api, 'get', '/firmware/signing-key');
    const { publicKey } = generateKeyPairSync('ed25519');
    await call(api, 'put', '/firmware/signing-key', {
      body: { public_key: publicKey.export({ type: 'spki', format: 'pem' }) },
    });
    await call(api, 'put', '/firmware/signing-key', { body: { public_key: 'not a key' } }); // 422
    await call(api, 'get', '/firmware/signing-key');
    for (const expected of [
      'get /firmware/signing-key 200',
      'put /firmware/signing-key 200',
      'put /firmware/signing-key 422',
    ])
      expect(checked).toContain(expected);
  });

  it('attaching a signature to a stored version answers validate (signed, refused, unknown)', async () => {
    const api = account.api;
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    await call(api, 'put', '/firmware/signing-key', {
      body: { public_key: publicKey.export({ type: 'spki', format: 'pem' }) },
    });
    // buildFirmwareVersion records the digest of 32 zero bytes (no binary: a deleted one works alike).
    const id = await buildFirmwareVersion(server, { accountId: account.accountId, model: 'LX-200', version: '0.0.1' });
    const path = '/firmware/versions/:id/signature';
    const signature = sign(null, Buffer.alloc(32), privateKey).toString('base64');
    await call(api, 'put', path, { params: { id }, body: { signature: Buffer.alloc(64).toString('base64') } }); // 422
    expect((await call(api, 'put', path, { params: { id }, body: { signature } })).body.firmware_version.signed).toBe(
      true,
    );
    await call(api, 'put', path, { body: { signature } }); // unknown id: 404
    for (const expected of [`put ${path} 200`, `put ${path} 422`, `put ${path} 404`])
      expect(checked).toContain(expected);
  });
});
