import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { ApiClient } from '../helpers/api-client';
import { buildModel } from '../helpers/factories';
import { gql, login } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';

const CLAIM =
  'mutation($input: ClaimDevicesInput!) { claimDevices(input: $input) { count credentials { serial password } } }';

/**
 * Keys are guessable (a production line numbers its batches), so a stored claim answer, device
 * passwords included, must only ever go back to the caller that made the claim: the role check
 * comes before any replay, and another caller with the same key is refused.
 */
describe('idempotent replays go only to the principal that made the request', () => {
  let server: TestServer;
  let account: TestAccount;
  let viewer: ApiClient;
  let secondAdmin: ApiClient;
  let viewerSession: { cookie: string; csrf: string };

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    await buildModel(account, 'LX-200');
    viewer = account.api.withKey(
      (await account.api.post('/api/v1/api-keys', { name: 'dashboard', role: 'viewer' })).body.secret,
    );
    secondAdmin = account.api.withKey(
      (await account.api.post('/api/v1/api-keys', { name: 'line 4', role: 'admin' })).body.secret,
    );
    const admin = { accountId: account.accountId, role: 'admin' as const, principal: 'test' };
    await server.service.services.users.create(admin, {
      email: `viewer-${Date.now()}@example.test`,
      password: 'viewer password',
      role: 'viewer',
    });
    const viewerEmail = await server.service.database
      .knex('users')
      .where({ account_id: account.accountId, role: 'viewer' })
      .first<{ email: string }>('email');
    viewerSession = await login(server.service.httpUrl, viewerEmail.email, 'viewer password');
  });
  afterAll(async () => ifStarted(server)?.close());

  const passwordsOf = (body: { devices?: Array<{ credentials: { password: string } }> }) =>
    (body.devices ?? []).map((d) => d.credentials.password);

  it('REST: a viewer key, a viewer session and another admin key get no replay of the claim', async () => {
    const body = { serials: ['PRIN-1', 'PRIN-2'], model: 'LX-200' };
    const headers = { 'Idempotency-Key': 'line3-2026-11-22-001' };
    const first = await account.api.post('/api/v1/devices/claim', body, headers);
    expect(first.status).toBe(201);
    const passwords = passwordsOf(first.body);
    expect(passwords).toHaveLength(2);

    const byViewerKey = await viewer.post('/api/v1/devices/claim', body, headers);
    expect(byViewerKey.status).toBe(403);
    expect(byViewerKey.body.code).toBe('forbidden');
    expect(byViewerKey.headers.get('idempotent-replayed')).toBeNull();

    const anon = new ApiClient(server.service.httpUrl);
    const bySession = await anon.post('/api/v1/devices/claim', body, {
      ...headers,
      cookie: viewerSession.cookie,
      'x-csrf-token': viewerSession.csrf,
    });
    expect(bySession.status).toBe(403);
    expect(bySession.body.code).toBe('forbidden');

    // An admin, but not the one that claimed: a clear refusal, never the other caller's answer.
    const byOtherAdmin = await secondAdmin.post('/api/v1/devices/claim', body, headers);
    expect(byOtherAdmin.status).toBe(422);
    expect(byOtherAdmin.body.code).toBe('idempotency_key_reused');
    expect(byOtherAdmin.headers.get('idempotent-replayed')).toBeNull();

    for (const res of [byViewerKey, bySession, byOtherAdmin]) {
      for (const password of passwords) expect(JSON.stringify(res.body)).not.toContain(password);
    }

    // The caller that claimed still gets its answer back.
    const retry = await account.api.post('/api/v1/devices/claim', body, headers);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(passwordsOf(retry.body)).toEqual(passwords);
  });

  it('GraphQL: a viewer with the same idempotencyKey is refused before any replay', async () => {
    const input = { serials: ['PRIN-GQ-1'], model: 'LX-200', idempotencyKey: 'line3-2026-11-22-002' };
    const first = await gql(server.service.httpUrl, CLAIM, { apiKey: account.apiKey, variables: { input } });
    expect(first.body.errors).toBeUndefined();
    const password = first.body.data.claimDevices.credentials[0].password as string;

    const byViewerKey = await gql(server.service.httpUrl, CLAIM, {
      apiKey: viewer.apiKey as string,
      variables: { input },
    });
    expect(byViewerKey.body.errors?.[0]?.extensions?.code).toBe('forbidden');
    const bySession = await gql(server.service.httpUrl, CLAIM, {
      cookie: viewerSession.cookie,
      csrf: viewerSession.csrf,
      variables: { input },
    });
    expect(bySession.body.errors?.[0]?.extensions?.code).toBe('forbidden');
    const byOtherAdmin = await gql(server.service.httpUrl, CLAIM, {
      apiKey: secondAdmin.apiKey as string,
      variables: { input },
    });
    expect(byOtherAdmin.body.errors?.[0]?.extensions?.code).toBe('idempotency_key_reused');
    for (const res of [byViewerKey, bySession, byOtherAdmin]) {
      expect(res.body.data?.claimDevices ?? null).toBeNull();
      expect(JSON.stringify(res.body)).not.toContain(password);
    }

    const retry = await gql(server.service.httpUrl, CLAIM, { apiKey: account.apiKey, variables: { input } });
    expect(retry.body.data).toEqual(first.body.data);
  });
});
