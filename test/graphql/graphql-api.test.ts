import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { gql, login } from './graphql-client';
import { newSigningKey, uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';

const DEVICE_FIELDS =
  'id serial name model firmware status lastSeen ip connectivity tags claimedAt update { state } config { desired { heartbeatIntervalS dimLevel timezone maintenanceWindow { start end } } desiredVersion reported { dimLevel } reportedVersion inSync }';

describe('GraphQL over HTTP', () => {
  let server: TestServer;
  let account: TestAccount;
  let other: TestAccount;
  let url: string;

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount({ quota: 50, budget: 1000, unitPrice: 2 });
    other = await server.createAccount();
    url = server.service.httpUrl;
    for (const a of [account, other]) await a.api.post('/api/v1/models', { name: 'LX-200', description: 'Linear' });
  });
  afterAll(async () => ifStarted(server)?.close());

  it('answers 401 without credentials and with a bad key, in GraphQL error shape', async () => {
    const none = await gql(url, '{ viewer { role } }');
    expect(none.status).toBe(401);
    expect(none.body.errors[0].extensions.code).toBe('unauthenticated');
    const bad = await gql(url, '{ viewer { role } }', { apiKey: 'flk_nope' });
    expect(bad.status).toBe(401);
  });

  it('claims, lists, reads, configures and rotates devices with an API key', async () => {
    const claim = await gql(
      url,
      `mutation($input: ClaimDevicesInput!) { claimDevices(input: $input) { count credentials { serial username password } charged { amount currency } devices { serial name model status firmware } } }`,
      {
        apiKey: account.apiKey,
        variables: { input: { serials: ['GQ-1', 'GQ-2', 'GQ-3'], model: 'LX-200', names: { 'GQ-1': 'Hall north' } } },
      },
    );
    expect(claim.body.errors).toBeUndefined();
    const claimed = claim.body.data.claimDevices;
    expect(claimed.count).toBe(3);
    expect(claimed.charged).toEqual({ amount: 6, currency: 'EUR' });
    expect(claimed.credentials.map((c: { username: string }) => c.username)).toEqual(['GQ-1', 'GQ-2', 'GQ-3']);
    expect(claimed.devices[0]).toMatchObject({
      serial: 'GQ-1',
      name: 'Hall north',
      model: 'LX-200',
      status: 'offline',
      firmware: null,
    });

    const page1 = await gql(
      url,
      `query($after: String) { devices(first: 2, after: $after, filter: { model: "LX-200" }) { totalCount quota edges { cursor node { ${DEVICE_FIELDS} } } pageInfo { hasNextPage endCursor } } }`,
      { apiKey: account.apiKey },
    );
    expect(page1.body.errors).toBeUndefined();
    const conn = page1.body.data.devices;
    expect(conn).toMatchObject({ totalCount: 3, quota: 50, pageInfo: { hasNextPage: true } });
    expect(conn.edges.map((e: { node: { serial: string } }) => e.node.serial)).toEqual(['GQ-1', 'GQ-2']);
    expect(conn.edges[0].node.config).toMatchObject({
      desired: { heartbeatIntervalS: 60, maintenanceWindow: null },
      inSync: false,
    });
    const page2 = await gql(
      url,
      `query($after: String) { devices(first: 2, after: $after) { edges { node { serial } } pageInfo { hasNextPage } } }`,
      {
        apiKey: account.apiKey,
        variables: { after: conn.pageInfo.endCursor },
      },
    );
    expect(page2.body.data.devices).toEqual({
      edges: [{ node: { serial: 'GQ-3' } }],
      pageInfo: { hasNextPage: false },
    });

    // Server-side order: names descending (GQ-2/GQ-3 are named after their serials), paged by edge cursors.
    const ordered = await gql(
      url,
      `{ devices(first: 2, orderBy: { field: NAME, direction: DESC }) { edges { cursor node { name } } pageInfo { hasNextPage endCursor } } }`,
      { apiKey: account.apiKey },
    );
    expect(ordered.body.errors).toBeUndefined();
    expect(ordered.body.data.devices.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual([
      'Hall north',
      'GQ-3',
    ]);
    const orderedRest = await gql(
      url,
      `query($after: String) { devices(first: 2, after: $after, orderBy: { field: NAME, direction: DESC }) { edges { node { name } } } }`,
      {
        apiKey: account.apiKey,
        variables: { after: ordered.body.data.devices.edges[1].cursor },
      },
    );
    expect(orderedRest.body.data.devices.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual(['GQ-2']);

    const updated = await gql(
      url,
      `mutation { updateDevice(serial: "GQ-2", input: { name: "Dock", tags: { zone: "A" }, config: { dimLevel: 40, maintenanceWindow: { start: "22:00", end: "04:00" } } }) { name tags config { desired { dimLevel maintenanceWindow { start end } } desiredVersion } history(first: 5) { edges { node { type occurredAt } } } } }`,
      { apiKey: account.apiKey },
    );
    expect(updated.body.errors).toBeUndefined();
    expect(updated.body.data.updateDevice).toMatchObject({
      name: 'Dock',
      tags: { zone: 'A' },
      config: { desired: { dimLevel: 40, maintenanceWindow: { start: '22:00', end: '04:00' } } },
    });
    expect(updated.body.data.updateDevice.history.edges.length).toBeGreaterThan(0);

    const invalid = await gql(
      url,
      `mutation { updateDevice(serial: "GQ-2", input: { config: { dimLevel: 400 } }) { name } }`,
      { apiKey: account.apiKey },
    );
    expect(invalid.body.errors[0].extensions).toMatchObject({ code: 'validation_failed', status: 422 });
    expect(invalid.body.errors[0].extensions.errors[0].field).toMatch(/dim_level/);

    const rotated = await gql(url, 'mutation { rotateDeviceCredentials(serial: "GQ-3") { username password } }', {
      apiKey: account.apiKey,
    });
    expect(rotated.body.data.rotateDeviceCredentials.username).toBe('GQ-3');
    expect(rotated.body.data.rotateDeviceCredentials.password).not.toBe(claimed.credentials[2].password);

    const summary = await gql(
      url,
      '{ fleetSummary { total online offline updating byModel { model count } byFirmware { firmware count } quota provisioned budget { amount currency } spent { amount } } allocation { quota provisioned remaining spent { amount } remainingBudget { amount } unitPrice { amount } thresholds } }',
      { apiKey: account.apiKey },
    );
    expect(summary.body.data.fleetSummary).toEqual({
      total: 3,
      online: 0,
      offline: 3,
      updating: 0,
      byModel: [{ model: 'LX-200', count: 3 }],
      byFirmware: [{ firmware: null, count: 3 }],
      quota: 50,
      provisioned: 3,
      budget: { amount: 1000, currency: 'EUR' },
      spent: { amount: 6 },
    });
    expect(summary.body.data.allocation).toMatchObject({
      quota: 50,
      provisioned: 3,
      remaining: 47,
      spent: { amount: 6 },
      remainingBudget: { amount: 994 },
      unitPrice: { amount: 2 },
      thresholds: [80, 90, 100],
    });
  });

  it('batches per-row fields: the statements of a page do not grow with its rows (DataLoader)', async () => {
    const knex = server.service.database.knex;
    const count = async (first: number) => {
      // History statements only (the page's total may come from a 1 s cache, or not).
      let statements = 0;
      const onQuery = (q: { sql: string }) => {
        if (/device_events/.test(q.sql)) statements += 1;
      };
      knex.on('query', onQuery);
      const res = await gql(
        url,
        `{ devices(first: ${first}) { edges { node { serial model update { state } history(first: 2) { edges { node { type } } pageInfo { hasNextPage endCursor } } } } } }`,
        { apiKey: account.apiKey },
      );
      knex.off('query', onQuery);
      expect(res.body.errors).toBeUndefined();
      return { statements, devices: res.body.data.devices.edges };
    };
    const one = await count(1);
    const three = await count(3);
    expect(three.devices).toHaveLength(3);
    expect(one.statements).toBe(1);
    expect(three.statements).toBe(1);
    // The batched first page is the same as the service's own paging (REST history).
    const viaRest = await account.api.get('/api/v1/devices/GQ-2/history?limit=2');
    const batched = three.devices.find((e: { node: { serial: string } }) => e.node.serial === 'GQ-2').node.history;
    expect(batched.edges.map((e: { node: { type: string } }) => e.node.type)).toEqual(
      viaRest.body.events.map((e: { type: string }) => e.type),
    );
    expect(batched.pageInfo.hasNextPage).toBe(viaRest.body.next_cursor !== null);
    const next = await gql(
      url,
      `query($after: String) { device(serial: "GQ-2") { history(first: 2, after: $after) { edges { node { type } } } } }`,
      { apiKey: account.apiKey, variables: { after: batched.pageInfo.endCursor } },
    );
    expect(next.body.errors).toBeUndefined();
  });

  it('rejects a claim all-or-nothing with the offending serials in extensions', async () => {
    const res = await gql(url, 'mutation($input: ClaimDevicesInput!) { claimDevices(input: $input) { count } }', {
      apiKey: account.apiKey,
      variables: { input: { serials: ['GQ-9', 'GQ-1', 'bad serial!'], model: 'LX-200' } },
    });
    expect(res.body.errors[0].extensions.code).toBe('claim_rejected');
    expect(JSON.stringify(res.body.errors[0].extensions)).toContain('bad serial!');
    const check = await gql(url, '{ device(serial: "GQ-9") { serial } }', { apiKey: account.apiKey });
    expect(check.body.data.device).toBeNull();
  });

  it('replays a claim with the same idempotency key', async () => {
    const query =
      'mutation($input: ClaimDevicesInput!) { claimDevices(input: $input) { count credentials { password } } }';
    const variables = { input: { serials: ['IDEM-1'], model: 'LX-200', idempotencyKey: 'k-1' } };
    const first = await gql(url, query, { apiKey: account.apiKey, variables });
    const second = await gql(url, query, { apiKey: account.apiKey, variables });
    expect(first.body.data.claimDevices.count).toBe(1);
    expect(second.body.data).toEqual(first.body.data);
  });

  it('isolates tenants: another account sees nothing and its mutations answer not_found', async () => {
    const read = await gql(
      url,
      '{ device(serial: "GQ-1") { serial } devices(first: 10) { totalCount edges { node { serial } } } fleetSummary { total } }',
      { apiKey: other.apiKey },
    );
    expect(read.body.data).toEqual({ device: null, devices: { totalCount: 0, edges: [] }, fleetSummary: { total: 0 } });
    const write = await gql(url, 'mutation { updateDevice(serial: "GQ-1", input: { name: "x" }) { name } }', {
      apiKey: other.apiKey,
    });
    expect(write.body.errors[0].extensions.code).toBe('not_found');
    const claim = await gql(url, 'mutation { claimDevices(input: { serials: ["GQ-1"], model: "LX-200" }) { count } }', {
      apiKey: other.apiKey,
    });
    expect(claim.body.errors[0].extensions.code).toBe('claim_rejected');
    expect(
      (await gql(url, '{ device(serial: "GQ-1") { name } }', { apiKey: account.apiKey })).body.data.device.name,
    ).toBe('Hall north');
  });

  it('enforces roles in the services: a viewer key reads but cannot change anything', async () => {
    const created = await gql(
      url,
      'mutation { createApiKey(input: { name: "ro", role: viewer }) { secret apiKey { role prefix } } }',
      { apiKey: account.apiKey },
    );
    const viewerKey = created.body.data.createApiKey.secret;
    expect(viewerKey).toMatch(/^flk_/);
    const read = await gql(url, '{ viewer { role apiKey { name } } devices(first: 1) { totalCount } }', {
      apiKey: viewerKey,
    });
    expect(read.body.data.viewer).toEqual({ role: 'viewer', apiKey: { name: 'ro' } });
    for (const mutation of [
      'updateDevice(serial: "GQ-1", input: { name: "x" }) { name }',
      'registerModel(input: { name: "M2" }) { name }',
      'createApiKey(input: { name: "x" }) { secret }',
    ]) {
      const res = await gql(url, `mutation { ${mutation} }`, { apiKey: viewerKey });
      expect(res.body.errors[0].extensions.code, mutation).toBe('forbidden');
    }
  });

  it('registers the firmware signing key (admins only) and shows versions as signed with their key id, per account', async () => {
    // An account of its own: this file's main key is close to its rate limit by the end.
    const signer = await server.createAccount();
    await signer.api.post('/api/v1/models', { name: 'LX-200' });
    const viewerKey = (await signer.api.post('/api/v1/api-keys', { name: 'ro', role: 'viewer' })).body.secret as string;
    const KEYS =
      '{ firmwareSigningKeys { current { keyId algorithm publicKey createdAt retiredAt } retired { keyId retiredAt } } }';
    const REGISTER =
      'mutation($input: RegisterFirmwareSigningKeyInput!) { registerFirmwareSigningKey(input: $input) { current { keyId } retired { keyId } } }';
    expect((await gql(url, KEYS, { apiKey: signer.apiKey })).body.data.firmwareSigningKeys).toEqual({
      current: null,
      retired: [],
    });
    const key = newSigningKey();
    const refused = await gql(url, REGISTER, { apiKey: viewerKey, variables: { input: { publicKey: key.publicPem } } });
    expect(refused.body.errors[0].extensions.code).toBe('forbidden');
    const invalid = await gql(url, REGISTER, {
      apiKey: signer.apiKey,
      variables: { input: { publicKey: 'not a key' } },
    });
    expect(invalid.body.errors[0].extensions).toMatchObject({
      code: 'invalid_signing_key',
      status: 422,
      errors: [{ field: 'publicKey' }],
    });
    const registered = await gql(url, REGISTER, {
      apiKey: signer.apiKey,
      variables: { input: { publicKey: key.publicPem } },
    });
    expect(registered.body.data.registerFirmwareSigningKey).toEqual({ current: { keyId: key.keyId }, retired: [] });
    const shown = await gql(url, KEYS, { apiKey: viewerKey });
    expect(shown.body.data.firmwareSigningKeys.current).toMatchObject({
      keyId: key.keyId,
      algorithm: 'ed25519',
      publicKey: key.publicPem,
      retiredAt: null,
    });
    expect((await gql(url, KEYS, { apiKey: other.apiKey })).body.data.firmwareSigningKeys).toEqual({
      current: null,
      retired: [],
    });

    await uploadFirmware(signer, { model: 'LX-200', version: '1.0.0', signature: key.privateKey, expectStatus: 201 });
    const versions = await gql(url, '{ firmwareVersions(model: "LX-200") { version signed signingKeyId signature } }', {
      apiKey: viewerKey,
    });
    expect(versions.body.data.firmwareVersions).toEqual([
      {
        version: '1.0.0',
        signed: true,
        signingKeyId: key.keyId,
        signature: expect.stringMatching(/^[A-Za-z0-9+/]{86}==$/),
      },
    ]);
  });

  it('accepts the portal session cookie; mutations need the CSRF token', async () => {
    const session = await login(url, account.adminEmail, account.adminPassword);
    const read = await gql(url, '{ viewer { role user { email } } models { name } }', { cookie: session.cookie });
    expect(read.body.data.viewer.user.email).toBe(account.adminEmail);
    const noCsrf = await gql(url, 'mutation { updateDevice(serial: "GQ-1", input: { name: "Cookie" }) { name } }', {
      cookie: session.cookie,
    });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.errors[0].extensions.code).toBe('csrf_failed');
    const wrongCsrf = await gql(url, 'mutation { updateDevice(serial: "GQ-1", input: { name: "Cookie" }) { name } }', {
      cookie: session.cookie,
      csrf: 'nope',
    });
    expect(wrongCsrf.status).toBe(403);
    expect(
      (await gql(url, '{ device(serial: "GQ-1") { name } }', { apiKey: account.apiKey })).body.data.device.name,
    ).toBe('Hall north');
    const ok = await gql(url, 'mutation { updateDevice(serial: "GQ-1", input: { name: "Cookie" }) { name } }', {
      cookie: session.cookie,
      csrf: session.csrf,
    });
    expect(ok.body.data.updateDevice.name).toBe('Cookie');
    await fetch(`${url}/api/v1/session`, { method: 'DELETE', headers: { cookie: session.cookie } });
    expect((await gql(url, '{ viewer { role } }', { cookie: session.cookie })).status).toBe(401);
  });

  it('refuses costly documents before executing them (aliases, depth, size)', async () => {
    const aliases = Array.from({ length: 500 }, (_, i) => `a${i}: devices(first: 1000) { totalCount }`).join(' ');
    const many = await gql(url, `{ ${aliases} }`, { apiKey: account.apiKey });
    expect(many.status).toBe(400);
    expect(many.body.errors[0].extensions.code).toBe('query_too_complex');
    const twenty = Array.from({ length: 20 }, (_, i) => `a${i}: devices(first: 1000) { totalCount }`).join(' ');
    const some = await gql(url, `{ ${twenty} }`, { apiKey: account.apiKey });
    expect(some.body.errors[0]).toMatchObject({ extensions: { code: 'query_too_complex' } });
    expect(some.body.errors[0].message).toMatch(/Aliases limit/);
    const tooBig = await gql(url, '{ devices(first: 5000) { totalCount } }', { apiKey: account.apiKey });
    expect(tooBig.body.errors[0].extensions.code).toBe('validation_failed');
    // Nested lists multiply: a page of 1000 devices with 500 history entries each is refused.
    const nested = await gql(
      url,
      '{ devices(first: 1000) { edges { node { serial history(first: 500) { edges { node { type data occurredAt } } } } } } }',
      { apiKey: account.apiKey },
    );
    expect(nested.status).toBe(400);
    expect(nested.body.errors[0].message).toMatch(/Cost limit/);
    const deep = await gql(
      url,
      `{ devices(first: 1) { edges { node { config { desired { maintenanceWindow { start } } } update { state } history(first: 1) { edges { node { type } } } } } } }`,
      { apiKey: account.apiKey },
    );
    expect(deep.body.errors).toBeUndefined();
    const malformed = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${account.apiKey}` },
      body: '{"query": ',
    });
    expect(malformed.status).toBe(400);
  });

  it('costs list sizes passed as variables or left to their defaults like literals', async () => {
    const lists = (first: string, history: string) =>
      Array.from(
        { length: 15 },
        (_, i) =>
          `a${i}: devices${first} { edges { node { serial history${history} { edges { node { type data } } } } } }`,
      ).join(' ');
    // The probe's query: 15,000 device nodes with 500 history entries each, for one rate-limit unit.
    const variables = await gql(url, `query($n: Int, $m: Int) { ${lists('(first: $n)', '(first: $m)')} }`, {
      apiKey: account.apiKey,
      variables: { n: 1000, m: 500 },
    });
    expect(variables.status).toBe(400);
    expect(variables.body.errors[0].extensions.code).toBe('query_too_complex');
    expect(variables.body.data ?? null).toBeNull();
    // Variable defaults and argument defaults (devices 50, history 20) count too.
    const defaults = await gql(url, `query($n: Int = 1000) { ${lists('(first: $n)', '')} }`, {
      apiKey: account.apiKey,
    });
    expect(defaults.body.errors[0].extensions.code).toBe('query_too_complex');
    const argumentDefaults = await gql(url, `{ ${lists('', '')} }`, { apiKey: account.apiKey });
    expect(argumentDefaults.body.errors[0].extensions.code).toBe('query_too_complex');
    // The same document with small pages runs.
    const small = await gql(url, `query($n: Int, $m: Int) { ${lists('(first: $n)', '(first: $m)')} }`, {
      apiKey: account.apiKey,
      variables: { n: 2, m: 2 },
    });
    expect(small.body.errors).toBeUndefined();
    expect(Array.isArray(small.body.data.a14.edges)).toBe(true);
  });

  it('rate limits API-key traffic together with REST (100 per minute), with RateLimit headers', async () => {
    const created = await account.api.post('/api/v1/api-keys', { name: 'burst', role: 'viewer' });
    const key = created.body.secret;
    const first = await gql(url, '{ viewer { role } }', { apiKey: key });
    expect(first.headers.get('ratelimit-limit')).toBe('100');
    expect(first.headers.get('ratelimit-remaining')).toBe('99');
    for (let i = 0; i < 49; i++) await gql(url, '{ viewer { role } }', { apiKey: key });
    for (let i = 0; i < 50; i++) await account.api.withKey(key).get('/api/v1/api-keys');
    const limited = await gql(url, '{ viewer { role } }', { apiKey: key });
    expect(limited.status).toBe(429);
    expect(limited.body.errors[0].extensions.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await gql(url, '{ viewer { role } }', { apiKey: account.apiKey })).status).toBe(200);
  });
});
