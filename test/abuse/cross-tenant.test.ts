import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { allRoutes } from '#rest/routes/index';
import type { RouteDef } from '#rest/route';
import { buildModel, claimDevices } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { makeCsr } from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

/**
 * OWASP API1 (BOLA), generated from the route table: for every route with an id in its path,
 * account B using account A's real ids gets exactly the 404 of a missing id, and A's data is
 * unchanged. A new route with a path id fails here until it names the fixture its ids come
 * from (FIXTURE_BY_PATH) and, for writes, a valid body (BODY_BY_OPERATION).
 */
interface Fixtures {
  serial: string;
  apiKeyId: string;
  webhookId: string;
  deliveryId: string;
  firmwareVersionId: string;
  deploymentId: string;
  certificateFingerprint: string;
  /** A model name only A has (both accounts have an `LX-200`). */
  modelName: string;
  siteId: string;
}

/** Which of A's ids each path parameter takes, by route path. */
const FIXTURE_BY_PATH: Record<string, (f: Fixtures) => Record<string, string>> = {
  '/api-keys/:id': (f) => ({ id: f.apiKeyId }),
  '/devices/:serial': (f) => ({ serial: f.serial }),
  '/devices/:serial/history': (f) => ({ serial: f.serial }),
  '/devices/:serial/luminaire': (f) => ({ serial: f.serial }),
  '/devices/:serial/credentials': (f) => ({ serial: f.serial }),
  '/devices/:serial/certificates': (f) => ({ serial: f.serial }),
  '/devices/:serial/certificates/:fingerprint': (f) => ({ serial: f.serial, fingerprint: f.certificateFingerprint }),
  '/firmware/versions/:id': (f) => ({ id: f.firmwareVersionId }),
  '/firmware/versions/:id/signature': (f) => ({ id: f.firmwareVersionId }),
  '/firmware/deployments/:id': (f) => ({ id: f.deploymentId }),
  '/firmware/deployments/:id/devices': (f) => ({ id: f.deploymentId }),
  '/firmware/deployments/:id/cancel': (f) => ({ id: f.deploymentId }),
  '/firmware/deployments/:id/pause': (f) => ({ id: f.deploymentId }),
  '/firmware/deployments/:id/resume': (f) => ({ id: f.deploymentId }),
  '/firmware/deployments/:id/retry-failed': (f) => ({ id: f.deploymentId }),
  '/firmware/deployments/:id/rollback': (f) => ({ id: f.deploymentId }),
  '/webhooks/:id': (f) => ({ id: f.webhookId }),
  '/sites/:id': (f) => ({ id: f.siteId }),
  '/devices/:serial/warranty-report': (f) => ({ serial: f.serial }),
  '/deployments/:id/fixture-gate': (f) => ({ id: f.deploymentId }),
  '/models/:name/health-thresholds': (f) => ({ name: f.modelName }),
  '/models/:name': (f) => ({ name: f.modelName }),
  '/devices/:serial/update-lock': (f) => ({ serial: f.serial }),
  '/devices/:serial/emergency-lighting': (f) => ({ serial: f.serial }),
  '/models/:name/emergency-lighting': (f) => ({ name: f.modelName }),
  '/webhooks/:id/deliveries': (f) => ({ id: f.webhookId }),
  '/webhooks/:id/deliveries/:deliveryId/redeliver': (f) => ({ id: f.webhookId, deliveryId: f.deliveryId }),
};

/** A valid body for each write with a path id, so validation cannot answer before the lookup. */
const BODY_BY_OPERATION: Record<string, unknown> = {
  updateDevice: { name: 'stolen', config: { dim_level: 1 } },
  updateWebhook: { enabled: false },
  setDeviceEmergencyLighting: { emergency_lighting: true },
  setModelEmergencyLighting: { emergency_lighting: true },
  updateSite: { name: 'stolen' },
  updateModel: { health_thresholds: null },
  updateFirmwareVersion: { upgrade_from: '>=0.1.0' },
  // Well-formed (64 bytes in base64): only the lookup can refuse it.
  attachFirmwareSignature: { signature: Buffer.alloc(64, 1).toString('base64') },
  // A valid CSR (set in beforeAll), so the answer cannot be a 422 about the request.
  issueDeviceCertificate: undefined,
};

describe("another account's ids answer 404 on every route (generated from the route table)", () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let fixtures: Fixtures;
  let routes: RouteDef[];

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(b, 'LX-200');
    await buildModel(a, 'A-ONLY-1');
    const fw1 = await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', expectStatus: 201 });
    await uploadFirmware(a, { model: 'LX-200', version: '1.1.0', expectStatus: 201 });
    const claimed = await claimDevices(a, { serials: ['TENANT-A-1', 'TENANT-A-2'], model: 'LX-200' });
    expect(claimed.devices).toHaveLength(2);
    BODY_BY_OPERATION.issueDeviceCertificate = { csr: (await makeCsr()).pem };
    const certificate = await a.api.post(
      '/api/v1/devices/TENANT-A-1/certificates',
      BODY_BY_OPERATION.issueDeviceCertificate,
    );
    expect(certificate.status, JSON.stringify(certificate.body)).toBe(201);
    const deploy = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '1.1.0',
      filter: { model: 'LX-200' },
    });
    expect(deploy.status, JSON.stringify(deploy.body)).toBe(202);
    const hook = await a.api.post('/api/v1/webhooks', {
      url: 'http://127.0.0.1:9/hook',
      event_types: ['device.online'],
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const webhookId = (hook.body.webhook ?? hook.body).id as string;
    // A delivery row of A's webhook, to aim at its redelivery route.
    const delivery = await server.service.database
      .knex('webhook_deliveries')
      .where({ webhook_id: webhookId })
      .first<{ id: string } | undefined>('id');
    const site = await a.api.post('/api/v1/sites', { name: 'A HQ', time_zone: 'Europe/Berlin' });
    expect(site.status, JSON.stringify(site.body)).toBe(201);
    fixtures = {
      serial: 'TENANT-A-1',
      siteId: site.body.site.id as string,
      apiKeyId: a.apiKeyId,
      webhookId,
      deliveryId: delivery?.id ?? '00000000-0000-4000-8000-000000000001',
      firmwareVersionId: (fw1.body.firmware_version ?? fw1.body).id as string,
      deploymentId: deploy.body.deployment_id as string,
      certificateFingerprint: certificate.body.fingerprint_sha256 as string,
      modelName: 'A-ONLY-1',
    };
    await server.service.services.apiKeys.setRateLimit(b.apiKeyId, 100_000);
    routes = allRoutes(server.service.services).filter((r) => r.path.includes(':'));
  });
  afterAll(async () => ifStarted(server)?.close());

  it('knows a fixture for every route with a path id', () => {
    const missing = routes.map((r) => r.path).filter((p) => !FIXTURE_BY_PATH[p]);
    expect(missing, 'add these paths to FIXTURE_BY_PATH').toEqual([]);
  });

  it("answers 404 to B for each of A's resources, like a missing id, and changes nothing", async () => {
    const snapshot = async () => ({
      device: (await a.api.get(`/api/v1/devices/${fixtures.serial}`)).body,
      keys: (await a.api.get('/api/v1/api-keys')).body,
      hooks: (await a.api.get('/api/v1/webhooks')).body,
      deployment: (await a.api.get(`/api/v1/firmware/deployments/${fixtures.deploymentId}`)).body,
      versions: (await a.api.get('/api/v1/firmware/versions')).body,
      certificates: (await a.api.get(`/api/v1/devices/${fixtures.serial}/certificates`)).body,
    });
    const before = await snapshot();
    const failures: string[] = [];
    for (const route of routes) {
      const params = FIXTURE_BY_PATH[route.path]?.(fixtures) ?? {};
      const path =
        '/api/v1' + route.path.replace(/:([A-Za-z]+)/g, (_m, name: string) => encodeURIComponent(params[name] ?? 'x'));
      const body = BODY_BY_OPERATION[route.operationId] ?? (route.body ? {} : undefined);
      const res = await b.api.request(route.method.toUpperCase(), path, body === undefined ? {} : { body });
      if (res.status !== 404)
        failures.push(
          `${route.method.toUpperCase()} ${route.path}: ${res.status} ${JSON.stringify(res.body).slice(0, 160)}`,
        );
      else expect(res.body.code).toBe('not_found');
    }
    expect(failures).toEqual([]);
    const after = await snapshot();
    expect(after.device.name).toBe(before.device.name);
    expect(after.device.config).toEqual(before.device.config);
    expect(after.keys.api_keys.map((k: { revoked_at: unknown }) => k.revoked_at)).toEqual(
      before.keys.api_keys.map((k: { revoked_at: unknown }) => k.revoked_at),
    );
    expect(after.hooks).toEqual(before.hooks);
    expect(after.deployment.deployment?.status ?? after.deployment.status).toBe(
      before.deployment.deployment?.status ?? before.deployment.status,
    );
    expect(after.versions).toEqual(before.versions);
    expect(after.certificates).toEqual(before.certificates);
  });

  it("gives B the same answer for A's serial as for a serial that does not exist", async () => {
    const foreign = await b.api.get(`/api/v1/devices/${fixtures.serial}`);
    const missing = await b.api.get('/api/v1/devices/NO-SUCH-SERIAL');
    expect(foreign.status).toBe(404);
    expect({ ...foreign.body, detail: undefined }).toEqual({ ...missing.body, detail: undefined });
    expect(foreign.body.detail).not.toContain(a.accountId);
  });

  it("does not list A's data to B", async () => {
    const devices = await b.api.get('/api/v1/devices?limit=100');
    expect(devices.body.total).toBe(0);
    expect(JSON.stringify((await b.api.get('/api/v1/firmware/versions')).body)).not.toContain(
      fixtures.firmwareVersionId,
    );
    expect(JSON.stringify((await b.api.get('/api/v1/firmware/deployments')).body)).not.toContain(fixtures.deploymentId);
    expect(JSON.stringify((await b.api.get('/api/v1/webhooks')).body)).not.toContain(fixtures.webhookId);
    expect(JSON.stringify((await b.api.get('/api/v1/api-keys')).body)).not.toContain(fixtures.apiKeyId);
  });
});

/**
 * The same for GraphQL, generated from the schema: every query and mutation taking an id-like
 * argument, called by B with A's ids, answers null or a `not_found` error, never A's data.
 */
describe("another account's ids are not found through any GraphQL field (generated from the schema)", async () => {
  const { buildASTSchema, parse, isObjectType, getNamedType, isNonNullType } = await import('graphql');
  const { loadTypeDefs } = await import('#api/graphql/schema-files');
  const { gql } = await import('../graphql/graphql-client');
  const schema = buildASTSchema(parse(loadTypeDefs().join('\n')));

  /** A's id for each id-like argument, by argument name. */
  const ARG_FIXTURE: Record<string, (f: Fixtures) => string> = {
    serial: (f) => f.serial,
    id: () => '', // resolved per field below
    webhookId: (f) => f.webhookId,
    deploymentId: (f) => f.deploymentId,
  };
  /** Which kind of resource a field's `id` argument names. */
  const ID_KIND: Record<string, (f: Fixtures) => string> = {
    deployment: (f) => f.deploymentId,
    cancelDeployment: (f) => f.deploymentId,
    pauseDeployment: (f) => f.deploymentId,
    resumeDeployment: (f) => f.deploymentId,
    rollbackDeployment: (f) => f.deploymentId,
    retryFailedDeployment: (f) => f.deploymentId,
    revokeApiKey: (f) => f.apiKeyId,
    updateWebhook: (f) => f.webhookId,
    deleteWebhook: (f) => f.webhookId,
    redeliverWebhookDelivery: (f) => f.deliveryId,
    firmwareVersion: (f) => f.firmwareVersionId,
    deleteFirmwareVersion: (f) => f.firmwareVersionId,
    attachFirmwareSignature: (f) => f.firmwareVersionId,
    updateFirmwareVersion: (f) => f.firmwareVersionId,
    site: (f) => f.siteId,
    updateSite: (f) => f.siteId,
    deleteSite: (f) => f.siteId,
  };
  /** Valid values for the other required arguments. */
  const OTHER_ARGS: Record<string, Record<string, unknown>> = {
    updateDevice: { input: { name: 'stolen' } },
    updateWebhook: { input: { enabled: false } },
    updateFirmwareVersion: { input: { upgradeFrom: '>=0.1.0' } },
    updateSite: { input: { name: 'stolen' } },
    attachFirmwareSignature: { input: { signature: Buffer.alloc(64, 1).toString('base64') } },
    // Set in beforeAll: a valid CSR, and A's real certificate fingerprint.
    issueDeviceCertificate: {},
    revokeDeviceCertificate: {},
  };

  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let fixtures: Fixtures;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    const fw1 = await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', expectStatus: 201 });
    await uploadFirmware(a, { model: 'LX-200', version: '1.1.0', expectStatus: 201 });
    await claimDevices(a, { serials: ['GQL-A-1'], model: 'LX-200' });
    const csr = (await makeCsr()).pem;
    OTHER_ARGS.issueDeviceCertificate = { csr };
    const certificate = await a.api.post('/api/v1/devices/GQL-A-1/certificates', { csr });
    expect(certificate.status).toBe(201);
    OTHER_ARGS.revokeDeviceCertificate = { fingerprint: certificate.body.fingerprint_sha256 };
    const deploy = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '1.1.0',
      filter: { model: 'LX-200' },
    });
    const hook = await a.api.post('/api/v1/webhooks', {
      url: 'http://127.0.0.1:9/hook',
      event_types: ['device.online'],
    });
    const webhookId = (hook.body.webhook ?? hook.body).id as string;
    const site = await a.api.post('/api/v1/sites', { name: 'A HQ', time_zone: 'Europe/Berlin' });
    expect(site.status, JSON.stringify(site.body)).toBe(201);
    fixtures = {
      serial: 'GQL-A-1',
      siteId: site.body.site.id as string,
      apiKeyId: a.apiKeyId,
      webhookId,
      deliveryId: '00000000-0000-4000-8000-000000000001',
      firmwareVersionId: (fw1.body.firmware_version ?? fw1.body).id as string,
      deploymentId: deploy.body.deployment_id as string,
      certificateFingerprint: certificate.body.fingerprint_sha256 as string,
      // No GraphQL field takes a model name; the REST routes use their own fixtures.
      modelName: 'LX-200',
    };
    await server.service.services.apiKeys.setRateLimit(b.apiKeyId, 100_000);
  });
  afterAll(async () => ifStarted(server)?.close());

  it('answers null or not_found for every field taking an id, and changes nothing', async () => {
    const failures: string[] = [];
    let checked = 0;
    for (const [kind, root] of [
      ['query', schema.getQueryType()],
      ['mutation', schema.getMutationType()],
    ] as const) {
      if (!root) continue;
      for (const field of Object.values(root.getFields())) {
        const idArgs = field.args.filter((arg) => arg.name in ARG_FIXTURE);
        if (idArgs.length === 0) continue;
        const variables: Record<string, unknown> = { ...OTHER_ARGS[field.name] };
        for (const arg of idArgs) {
          variables[arg.name] = arg.name === 'id' ? ID_KIND[field.name]?.(fixtures) : ARG_FIXTURE[arg.name]!(fixtures);
          if (variables[arg.name] === undefined) failures.push(`${field.name}: add its id kind to ID_KIND`);
        }
        const required = field.args.filter((arg) => isNonNullType(arg.type) && arg.defaultValue === undefined);
        const missing = required.filter((arg) => !(arg.name in variables));
        if (missing.length) {
          failures.push(`${field.name}: add values for ${missing.map((m) => m.name).join(', ')} to OTHER_ARGS`);
          continue;
        }
        const decls = field.args
          .filter((arg) => arg.name in variables)
          .map((arg) => `$${arg.name}: ${arg.type.toString()}`);
        const call = field.args.filter((arg) => arg.name in variables).map((arg) => `${arg.name}: $${arg.name}`);
        const selection = isObjectType(getNamedType(field.type)) ? ' { __typename }' : '';
        const query = `${kind} Probe(${decls.join(', ')}) { ${field.name}(${call.join(', ')})${selection} }`;
        const res = await gql(server.service.httpUrl, query, { variables, apiKey: b.apiKey });
        checked += 1;
        const value = res.body?.data?.[field.name];
        const codes = (res.body?.errors ?? []).map((e: { extensions?: { code?: string } }) => e.extensions?.code);
        const ok =
          (value === null || value === undefined) &&
          (codes.length === 0 ? !isNonNullType(field.type) : codes.every((c: string) => c === 'not_found'));
        if (!ok) failures.push(`${field.name}: ${JSON.stringify(res.body).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
    expect(checked).toBeGreaterThanOrEqual(10);
    const device = await a.api.get(`/api/v1/devices/${fixtures.serial}`);
    expect(device.body.name).not.toBe('stolen');
    expect(
      (await a.api.get('/api/v1/api-keys')).body.api_keys.every((k: { revoked_at: unknown }) => k.revoked_at === null),
    ).toBe(true);
    const certificates = (await a.api.get(`/api/v1/devices/${fixtures.serial}/certificates`)).body
      .certificates as Array<{ revoked_at: unknown }>;
    expect(certificates.map((c) => c.revoked_at)).toEqual([null]);
  });
});
