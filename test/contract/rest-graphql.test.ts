import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { gql } from '../graphql/graphql-client';
import { newSigningKey, signFirmware } from '../ota/ota-helpers';
import { makeCsr } from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

/**
 * The shared contract (architecture.md rule 10): one scenario, driven once through REST and
 * once through GraphQL against two fresh accounts, must give the same results. Each driver
 * turns its transport's answer into the same neutral shape; serials are prefixed per driver
 * (they are unique across accounts) and the prefix is removed before comparing.
 */
// Neutral results are compared as plain JSON values.
type Json = any;

interface Driver {
  registerModel(name: string): Promise<Json>;
  claim(serials: string[], model: string, firmware?: string): Promise<Json>;
  list(input: {
    limit: number;
    cursor?: string;
    status?: string;
    model?: string;
  }): Promise<{ total: number; quota: number; serials: string[]; next: string | null }>;
  get(serial: string): Promise<Json>;
  update(serial: string, patch: { name?: string; dimLevel?: number; tags?: Record<string, string> }): Promise<Json>;
  allocation(): Promise<Json>;
  firmwareVersions(model: string): Promise<string[]>;
  registerSigningKey(publicPem: string): Promise<Json>;
  signedVersions(model: string): Promise<Json>;
  deploy(version: string, model: string): Promise<Json>;
  deployment(id: string): Promise<Json>;
  cancel(id: string): Promise<Json>;
  createKey(name: string): Promise<Json>;
  createWebhook(url: string, types: string[]): Promise<Json>;
  webhooks(): Promise<Json>;
  /** Device certificates: what the portal's device page shows and does. */
  issueCertificate(serial: string, csr: string): Promise<Json>;
  certificates(serial: string): Promise<Json>;
  revokeCertificate(serial: string, fingerprint: string): Promise<Json>;
  /** A planned (in-band) password rotation: pending, never the secret. */
  startRotation(serial: string, graceS?: number): Promise<Json>;
}

/** A started rotation in neutral form: the grace period in seconds instead of two timestamps. */
const rotationOf = (r: { kind: string; state: string; createdAt: string; graceEndsAt: string; id: string }) => ({
  kind: r.kind,
  state: r.state,
  graceS: (Date.parse(r.graceEndsAt) - Date.parse(r.createdAt)) / 1000,
  id: typeof r.id === 'string',
});

/** A certificate in neutral form: no fingerprint or dates (they differ per issue), whether it is revoked. */
const certificateOf = (c: {
  serial: string;
  keyAlgorithm: string;
  revoked: boolean;
  reason: string | null;
  pem: string;
  fingerprint: string;
}) => ({
  serial: c.serial,
  keyAlgorithm: c.keyAlgorithm,
  revoked: c.revoked,
  reason: c.reason,
  pem: c.pem.startsWith('-----BEGIN CERTIFICATE-----'),
  fingerprint: /^[0-9a-f]{64}$/.test(c.fingerprint),
});

/** A transport error as {error: code}. */
const failure = (code: string) => ({ error: code });

function restDriver(account: TestAccount): Driver {
  const api = account.api;
  const deviceOf = (d: Json) => ({
    serial: d.serial,
    name: d.name,
    model: d.model,
    firmware: d.firmware,
    status: d.status,
    ip: d.ip,
    tags: d.tags,
    dimLevel: d.config.desired.dim_level ?? null,
    desiredVersion: d.config.desired_version,
    inSync: d.config.in_sync,
  });
  const deploymentOf = (d: Json) => ({
    status: d.status,
    targetCount: d.target_count,
    targetVersion: d.target_version,
    model: d.model,
    kind: d.kind,
    queued: d.counts.queued,
    cancelled: d.counts.cancelled,
    progress: d.progress_percent,
  });
  return {
    async registerModel(name) {
      const res = await api.post('/api/v1/models', { name, description: 'Linear' });
      return res.status === 201
        ? { name: res.body.model.name, description: res.body.model.description }
        : failure(res.body.code);
    },
    async claim(serials, model, firmware) {
      const res = await api.post('/api/v1/devices/claim', { serials, model, ...(firmware ? { firmware } : {}) });
      if (res.status !== 201)
        return { ...failure(res.body.code), offending: (res.body.errors ?? []).map((e: Json) => e.field).length > 0 };
      return {
        count: res.body.claimed,
        charged: res.body.charged,
        devices: res.body.devices.map(deviceOf),
        usernames: res.body.devices.map((d: Json) => d.credentials.username),
        hasDeployment: res.body.deployment_id !== null,
      };
    },
    async list({ limit, cursor, status, model }) {
      const q = new URLSearchParams({
        limit: String(limit),
        ...(cursor ? { cursor } : {}),
        ...(status ? { status } : {}),
        ...(model ? { model } : {}),
      });
      const res = await api.get(`/api/v1/devices?${q}`);
      return {
        total: res.body.total,
        quota: res.body.quota,
        serials: res.body.devices.map((d: Json) => d.serial),
        next: res.body.next_cursor ?? null,
      };
    },
    async get(serial) {
      const res = await api.get(`/api/v1/devices/${encodeURIComponent(serial)}`);
      return res.status === 200 ? deviceOf(res.body) : failure(res.body.code);
    },
    async update(serial, patch) {
      const res = await api.patch(`/api/v1/devices/${encodeURIComponent(serial)}`, {
        ...(patch.name ? { name: patch.name } : {}),
        ...(patch.tags ? { tags: patch.tags } : {}),
        ...(patch.dimLevel !== undefined ? { config: { dim_level: patch.dimLevel } } : {}),
      });
      return res.status === 200 ? deviceOf(res.body) : failure(res.body.code);
    },
    async allocation() {
      const b = (await api.get('/api/v1/allocation')).body;
      return {
        quota: b.quota,
        provisioned: b.provisioned,
        available: b.available,
        budget: b.budget.amount,
        spent: b.budget.spent,
        remaining: b.budget.remaining,
        unitPrice: b.unit_price,
      };
    },
    async firmwareVersions(model) {
      return (await api.get(`/api/v1/firmware/versions?model=${encodeURIComponent(model)}`)).body.versions.map(
        (v: Json) => v.version,
      );
    },
    async registerSigningKey(publicPem) {
      const res = await api.request('PUT', '/api/v1/firmware/signing-key', { body: { public_key: publicPem } });
      return res.status === 200
        ? { current: res.body.signing_key.key_id, retired: res.body.retired_keys.map((k: Json) => k.key_id) }
        : failure(res.body.code);
    },
    async signedVersions(model) {
      return (await api.get(`/api/v1/firmware/versions?model=${encodeURIComponent(model)}`)).body.versions.map(
        (v: Json) => ({ version: v.version, signed: v.signed, keyId: v.key_id, signature: v.signature }),
      );
    },
    async deploy(version, model) {
      const res = await api.post('/api/v1/firmware/deploy', { firmware_version: version, filter: { model } });
      return res.status === 202
        ? { id: res.body.deployment_id, ...deploymentOf(res.body.deployment) }
        : failure(res.body.code);
    },
    async deployment(id) {
      const res = await api.get(`/api/v1/firmware/deployments/${id}`);
      return res.status === 200 ? deploymentOf(res.body.deployment) : failure(res.body.code);
    },
    async cancel(id) {
      const res = await api.post(`/api/v1/firmware/deployments/${id}/cancel`);
      return res.status === 200 ? deploymentOf(res.body.deployment) : failure(res.body.code);
    },
    async createKey(name) {
      const res = await api.post('/api/v1/api-keys', { name, role: 'viewer' });
      return { name: res.body.api_key.name, role: res.body.api_key.role, secretShown: /^flk_/.test(res.body.secret) };
    },
    async createWebhook(url, types) {
      const res = await api.post('/api/v1/webhooks', { url, event_types: types });
      return res.status === 201
        ? {
            url: res.body.webhook.url,
            types: res.body.webhook.event_types,
            enabled: res.body.webhook.enabled,
            secretShown: /^whsec_/.test(res.body.secret),
          }
        : failure(res.body.code);
    },
    async webhooks() {
      return (await api.get('/api/v1/webhooks')).body.webhooks.map((w: Json) => ({
        url: w.url,
        types: w.event_types,
        enabled: w.enabled,
      }));
    },
    async issueCertificate(serial, csr) {
      const res = await api.post(`/api/v1/devices/${encodeURIComponent(serial)}/certificates`, { csr });
      return res.status === 201
        ? { ...certificateOfRest(res.body), id: res.body.fingerprint_sha256 }
        : failure(res.body.code);
    },
    async certificates(serial) {
      const res = await api.get(`/api/v1/devices/${encodeURIComponent(serial)}/certificates`);
      return res.status === 200 ? res.body.certificates.map(certificateOfRest) : failure(res.body.code);
    },
    async revokeCertificate(serial, fingerprint) {
      const res = await api.delete(
        `/api/v1/devices/${encodeURIComponent(serial)}/certificates/${encodeURIComponent(fingerprint)}`,
      );
      return res.status === 200 ? certificateOfRest(res.body) : failure(res.body.code);
    },
    async startRotation(serial, graceS) {
      const res = await api.post(`/api/v1/devices/${encodeURIComponent(serial)}/credentials`, {
        mode: 'in_band',
        ...(graceS !== undefined ? { grace_s: graceS } : {}),
      });
      if (res.status !== 202) return failure(res.body.code);
      const r = res.body.rotation;
      return rotationOf({
        kind: r.kind,
        state: r.state,
        createdAt: r.created_at,
        graceEndsAt: r.grace_ends_at,
        id: r.id,
      });
    },
  };
}

const certificateOfRest = (c: Json) =>
  certificateOf({
    serial: c.serial,
    keyAlgorithm: c.key_algorithm,
    revoked: c.revoked_at !== null,
    reason: c.revoked_reason,
    pem: c.certificate,
    fingerprint: c.fingerprint_sha256,
  });
const certificateOfGraphql = (c: Json) =>
  certificateOf({
    serial: c.serial,
    keyAlgorithm: c.keyAlgorithm,
    revoked: c.revokedAt !== null,
    reason: c.revokedReason,
    pem: c.pem,
    fingerprint: c.fingerprintSha256,
  });
const CERTIFICATE = 'serial keyAlgorithm revokedAt revokedReason pem fingerprintSha256';

function graphqlDriver(server: TestServer, account: TestAccount): Driver {
  const run = async (query: string, variables: Record<string, unknown> = {}) => {
    const res = await gql(server.service.httpUrl, query, { apiKey: account.apiKey, variables });
    return res.body as { data: Json; errors?: Array<{ extensions: { code: string; errors?: unknown[] } }> };
  };
  const DEVICE = 'serial name model firmware status ip tags config { desired { dimLevel } desiredVersion inSync }';
  const deviceOf = (d: Json) => ({
    serial: d.serial,
    name: d.name,
    model: d.model,
    firmware: d.firmware,
    status: d.status,
    ip: d.ip,
    tags: d.tags,
    dimLevel: d.config.desired.dimLevel,
    desiredVersion: d.config.desiredVersion,
    inSync: d.config.inSync,
  });
  const DEPLOYMENT = 'id status targetCount targetVersion model kind counts { queued cancelled } progress';
  const deploymentOf = (d: Json) => ({
    status: d.status,
    targetCount: d.targetCount,
    targetVersion: d.targetVersion,
    model: d.model,
    kind: d.kind,
    queued: d.counts.queued,
    cancelled: d.counts.cancelled,
    progress: d.progress,
  });
  return {
    async registerModel(name) {
      const r = await run(
        'mutation($name: String!) { registerModel(input: { name: $name, description: "Linear" }) { name description } }',
        { name },
      );
      return r.errors ? failure(r.errors[0]!.extensions.code) : r.data.registerModel;
    },
    async claim(serials, model, firmware) {
      const r = await run(
        `mutation($input: ClaimDevicesInput!) { claimDevices(input: $input) { count charged { amount currency } devices { ${DEVICE} } credentials { username } deploymentId } }`,
        {
          input: { serials, model, ...(firmware ? { firmware } : {}) },
        },
      );
      if (r.errors)
        return {
          ...failure(r.errors[0]!.extensions.code),
          offending: (r.errors[0]!.extensions.errors ?? []).length > 0,
        };
      const c = r.data.claimDevices;
      return {
        count: c.count,
        charged: c.charged,
        devices: c.devices.map(deviceOf),
        usernames: c.credentials.map((x: Json) => x.username),
        hasDeployment: c.deploymentId !== null,
      };
    },
    async list({ limit, cursor, status, model }) {
      const r = await run(
        'query($first: Int, $after: String, $filter: DeviceFilter) { devices(first: $first, after: $after, filter: $filter) { totalCount quota edges { node { serial } } pageInfo { hasNextPage endCursor } } }',
        {
          first: limit,
          after: cursor ?? null,
          filter: { ...(status ? { status } : {}), ...(model ? { model } : {}) },
        },
      );
      const d = r.data.devices;
      return {
        total: d.totalCount,
        quota: d.quota,
        serials: d.edges.map((e: Json) => e.node.serial),
        next: d.pageInfo.hasNextPage ? d.pageInfo.endCursor : null,
      };
    },
    async get(serial) {
      const r = await run(`query($serial: String!) { device(serial: $serial) { ${DEVICE} } }`, { serial });
      return r.data.device ? deviceOf(r.data.device) : failure('not_found');
    },
    async update(serial, patch) {
      const r = await run(
        `mutation($serial: String!, $input: UpdateDeviceInput!) { updateDevice(serial: $serial, input: $input) { ${DEVICE} } }`,
        {
          serial,
          input: {
            ...(patch.name ? { name: patch.name } : {}),
            ...(patch.tags ? { tags: patch.tags } : {}),
            ...(patch.dimLevel !== undefined ? { config: { dimLevel: patch.dimLevel } } : {}),
          },
        },
      );
      return r.errors ? failure(r.errors[0]!.extensions.code) : deviceOf(r.data.updateDevice);
    },
    async allocation() {
      const a = (
        await run(
          '{ allocation { quota provisioned remaining budget { amount } spent { amount } remainingBudget { amount } unitPrice { amount } } }',
        )
      ).data.allocation;
      return {
        quota: a.quota,
        provisioned: a.provisioned,
        available: a.remaining,
        budget: a.budget.amount,
        spent: a.spent.amount,
        remaining: a.remainingBudget.amount,
        unitPrice: a.unitPrice.amount,
      };
    },
    async firmwareVersions(model) {
      return (
        await run('query($model: String) { firmwareVersions(model: $model) { version } }', { model })
      ).data.firmwareVersions.map((v: Json) => v.version);
    },
    async registerSigningKey(publicPem) {
      const r = await run(
        'mutation($input: RegisterFirmwareSigningKeyInput!) { registerFirmwareSigningKey(input: $input) { current { keyId } retired { keyId } } }',
        { input: { publicKey: publicPem } },
      );
      return r.errors
        ? failure(r.errors[0]!.extensions.code)
        : {
            current: r.data.registerFirmwareSigningKey.current.keyId,
            retired: r.data.registerFirmwareSigningKey.retired.map((k: Json) => k.keyId),
          };
    },
    async signedVersions(model) {
      return (
        await run(
          'query($model: String) { firmwareVersions(model: $model) { version signed signingKeyId signature } }',
          { model },
        )
      ).data.firmwareVersions.map((v: Json) => ({
        version: v.version,
        signed: v.signed,
        keyId: v.signingKeyId,
        signature: v.signature,
      }));
    },
    async deploy(version, model) {
      const r = await run(
        `mutation($input: DeployFirmwareInput!) { deployFirmware(input: $input) { ${DEPLOYMENT} } }`,
        { input: { firmwareVersion: version, filter: { model } } },
      );
      return r.errors
        ? failure(r.errors[0]!.extensions.code)
        : { id: r.data.deployFirmware.id, ...deploymentOf(r.data.deployFirmware) };
    },
    async deployment(id) {
      const r = await run(`query($id: ID!) { deployment(id: $id) { ${DEPLOYMENT} } }`, { id });
      if (r.errors) return failure(r.errors[0]!.extensions.code);
      return r.data.deployment ? deploymentOf(r.data.deployment) : failure('not_found');
    },
    async cancel(id) {
      const r = await run(`mutation($id: ID!) { cancelDeployment(id: $id) { ${DEPLOYMENT} } }`, { id });
      return r.errors ? failure(r.errors[0]!.extensions.code) : deploymentOf(r.data.cancelDeployment);
    },
    async createKey(name) {
      const c = (
        await run(
          'mutation($name: String!) { createApiKey(input: { name: $name, role: viewer }) { secret apiKey { name role } } }',
          { name },
        )
      ).data.createApiKey;
      return { name: c.apiKey.name, role: c.apiKey.role, secretShown: /^flk_/.test(c.secret) };
    },
    async createWebhook(url, types) {
      const r = await run(
        'mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { secret webhook { url eventTypes enabled } } }',
        { input: { url, eventTypes: types } },
      );
      if (r.errors) return failure(r.errors[0]!.extensions.code);
      const w = r.data.createWebhook;
      return {
        url: w.webhook.url,
        types: w.webhook.eventTypes,
        enabled: w.webhook.enabled,
        secretShown: /^whsec_/.test(w.secret),
      };
    },
    async webhooks() {
      return (await run('{ webhooks { url eventTypes enabled } }')).data.webhooks.map((w: Json) => ({
        url: w.url,
        types: w.eventTypes,
        enabled: w.enabled,
      }));
    },
    async issueCertificate(serial, csr) {
      const r = await run(
        `mutation($serial: String!, $csr: String!) { issueDeviceCertificate(serial: $serial, csr: $csr) { ${CERTIFICATE} } }`,
        { serial, csr },
      );
      return r.errors
        ? failure(r.errors[0]!.extensions.code)
        : {
            ...certificateOfGraphql(r.data.issueDeviceCertificate),
            id: r.data.issueDeviceCertificate.fingerprintSha256,
          };
    },
    async certificates(serial) {
      const r = await run(`query($serial: String!) { device(serial: $serial) { certificates { ${CERTIFICATE} } } }`, {
        serial,
      });
      return r.data.device ? r.data.device.certificates.map(certificateOfGraphql) : failure('not_found');
    },
    async revokeCertificate(serial, fingerprint) {
      const r = await run(
        `mutation($serial: String!, $fingerprint: String!) { revokeDeviceCertificate(serial: $serial, fingerprint: $fingerprint) { ${CERTIFICATE} } }`,
        { serial, fingerprint },
      );
      return r.errors ? failure(r.errors[0]!.extensions.code) : certificateOfGraphql(r.data.revokeDeviceCertificate);
    },
    async startRotation(serial, graceS) {
      const r = await run(
        `mutation($serial: String!, $graceS: Int) { startDeviceCredentialRotation(serial: $serial, graceS: $graceS) { id kind state createdAt graceEndsAt } }`,
        { serial, ...(graceS !== undefined ? { graceS } : {}) },
      );
      return r.errors ? failure(r.errors[0]!.extensions.code) : rotationOf(r.data.startDeviceCredentialRotation);
    },
  };
}

/** One manufacturer's keys, registered by both accounts so both give the same key ids. */
const SIGNING_KEYS = [newSigningKey(), newSigningKey()] as const;

async function uploadFirmware(
  server: TestServer,
  account: TestAccount,
  model: string,
  version: string,
  signWith?: (typeof SIGNING_KEYS)[number]['privateKey'],
): Promise<void> {
  const form = new FormData();
  form.set('model', model);
  form.set('version', version);
  form.set('release_notes', `Release ${version}`);
  form.set('changelog', '- fixes');
  form.set('file', new Blob([Buffer.from(`firmware ${version}`)]), `fw-${version}.bin`);
  if (signWith) form.set('signature', signFirmware(signWith, Buffer.from(`firmware ${version}`)));
  const res = await fetch(`${server.service.httpUrl}/api/v1/firmware/versions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${account.apiKey}` },
    body: form,
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

/** The scenario; returns every step's neutral result with the driver's serial prefix removed. */
async function scenario(server: TestServer, account: TestAccount, driver: Driver, prefix: string): Promise<Json> {
  const s = (n: number) => `${prefix}-${n}`;
  const out: Record<string, Json> = {};
  out.model = await driver.registerModel('LX-200');
  out.modelAgain = await driver.registerModel('LX-200');
  // Binaries are uploaded through REST in both cases (GraphQL has no file upload, docs/graphql.md).
  for (const version of ['1.0.0', '1.10.0', '1.9.2']) await uploadFirmware(server, account, 'LX-200', version);
  out.claim = await driver.claim([s(1), s(2), s(3)], 'LX-200', '1.0.0');
  out.claimUnknownModel = await driver.claim([s(4)], 'NOPE');
  out.claimTwice = await driver.claim([s(5), s(1)], 'LX-200');
  out.claimBadSerial = await driver.claim(['bad serial!'], 'LX-200');
  const page1 = await driver.list({ limit: 2 });
  const page2 = await driver.list({ limit: 2, cursor: page1.next! });
  out.pages = [
    { ...page1, next: page1.next !== null },
    { ...page2, next: page2.next !== null },
  ];
  out.offline = (await driver.list({ limit: 10, status: 'offline' })).total;
  out.unknownModel = (await driver.list({ limit: 10, model: 'NOPE' })).total;
  out.get = await driver.get(s(2));
  out.getMissing = await driver.get(s(99));
  out.update = await driver.update(s(2), { name: 'Dock', dimLevel: 40, tags: { zone: 'A' } });
  out.updateInvalid = await driver.update(s(2), { dimLevel: 400 });
  out.updateMissing = await driver.update(s(99), { name: 'x' });
  out.allocation = await driver.allocation();
  out.versions = await driver.firmwareVersions('LX-200');
  const deployed = await driver.deploy('1.10.0', 'LX-200');
  out.deploy = { ...deployed, id: typeof deployed.id === 'string' };
  out.deployment = await driver.deployment(deployed.id);
  out.deploymentMissing = await driver.deployment('00000000-0000-4000-8000-000000000000');
  out.deployUnknown = await driver.deploy('9.9.9', 'LX-200');
  out.cancel = await driver.cancel(deployed.id);
  out.cancelAgain = await driver.cancel(deployed.id);
  out.key = await driver.createKey('automation');
  out.webhook = await driver.createWebhook('https://hooks.example.com/fleet', [
    'device.online',
    'firmware.update.failed',
  ]);
  out.webhookBad = await driver.createWebhook('https://hooks.example.com/fleet', ['device.updated']);
  out.webhooks = await driver.webhooks();
  out.signingKeyInvalid = await driver.registerSigningKey('not a key');
  out.signingKey = await driver.registerSigningKey(SIGNING_KEYS[0].publicPem);
  await uploadFirmware(server, account, 'LX-200', '2.0.0', SIGNING_KEYS[0].privateKey);
  out.signingKeyRotated = await driver.registerSigningKey(SIGNING_KEYS[1].publicPem);
  out.signedVersions = await driver.signedVersions('LX-200');
  const issued = await driver.issueCertificate(s(3), (await makeCsr({ type: 'Ed25519' })).pem);
  out.certificate = { ...issued, id: typeof issued.id === 'string' };
  out.certificateBadCsr = await driver.issueCertificate(s(3), 'not a csr');
  out.certificateMissing = await driver.issueCertificate(s(99), (await makeCsr()).pem);
  out.certificates = await driver.certificates(s(3));
  out.revoke = await driver.revokeCertificate(s(3), issued.id);
  out.revokeUnknown = await driver.revokeCertificate(s(3), '0'.repeat(64));
  out.certificatesAfter = await driver.certificates(s(3));
  out.rotation = await driver.startRotation(s(2));
  out.rotationGrace = await driver.startRotation(s(2), 3600);
  out.rotationBadGrace = await driver.startRotation(s(2), 60);
  out.rotationMissing = await driver.startRotation(s(99));
  return JSON.parse(JSON.stringify(out).replaceAll(`${prefix}-`, 'SN-'));
}

describe('contract: the same scenario through REST and GraphQL gives the same results', () => {
  let server: TestServer;
  let restAccount: TestAccount;
  let graphqlAccount: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    restAccount = await server.createAccount({ quota: 10, budget: 500, unitPrice: 2.5 });
    graphqlAccount = await server.createAccount({ quota: 10, budget: 500, unitPrice: 2.5 });
  });
  afterAll(async () => ifStarted(server)?.close());

  it('matches step by step', async () => {
    const viaRest = await scenario(server, restAccount, restDriver(restAccount), 'REST');
    const viaGraphql = await scenario(server, graphqlAccount, graphqlDriver(server, graphqlAccount), 'GQL');
    // Sanity: the scenario did what it says (so equal results are not equal failures).
    expect(viaRest.claim.count).toBe(3);
    expect(viaRest.claimUnknownModel.error).toBe('unknown_model');
    expect(viaRest.claimTwice.error).toBe('claim_rejected');
    expect(viaRest.update).toMatchObject({ name: 'Dock', dimLevel: 40, tags: { zone: 'A' } });
    expect(viaRest.versions).toEqual(['1.10.0', '1.9.2', '1.0.0']);
    expect(viaRest.deploy).toMatchObject({ status: expect.any(String), targetCount: 3, progress: 0 });
    // The devices never connected: cancelling ends every update and none installed the version
    // (progress counts installed devices; it is the domain's, one figure for both).
    expect(viaRest.cancel).toMatchObject({ status: 'cancelled', progress: 0 });
    expect(viaRest.signingKeyInvalid.error).toBe('invalid_signing_key');
    expect(viaRest.signingKeyRotated).toEqual({ current: SIGNING_KEYS[1].keyId, retired: [SIGNING_KEYS[0].keyId] });
    expect(viaRest.signedVersions[0]).toMatchObject({ version: '2.0.0', signed: true, keyId: SIGNING_KEYS[0].keyId });
    expect(viaRest.signedVersions[1]).toMatchObject({ version: '1.10.0', signed: false, keyId: null, signature: null });
    expect(viaRest.certificate).toMatchObject({ serial: 'SN-3', keyAlgorithm: 'Ed25519', revoked: false, pem: true });
    expect(viaRest.certificateBadCsr.error).toBe('csr_invalid');
    expect(viaRest.revoke).toMatchObject({ revoked: true, reason: 'revoked' });
    expect(viaRest.revokeUnknown.error).toBe('not_found');
    for (const step of Object.keys(viaRest)) expect(viaGraphql[step], step).toEqual(viaRest[step]);
  });
});
