import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { ApiClient } from '../helpers/api-client';
import { ifStarted } from '../helpers/teardown';

describe('service foundation', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
  });
  afterAll(async () => ifStarted(server)?.close());

  it('answers liveness and readiness without authentication', async () => {
    const anon = new ApiClient(server.service.httpUrl);
    expect((await anon.get('/healthz')).status).toBe(200);
    const ready = await anon.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.checks.database.ok).toBe(true);
  });

  it('serves Prometheus metrics', async () => {
    const res = await new ApiClient(server.service.httpUrl).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.body).toContain('fleet_http_requests_total');
  });

  it('refuses requests without or with a bad key as problem+json 401', async () => {
    const anon = new ApiClient(server.service.httpUrl);
    const none = await anon.get('/api/v1/api-keys');
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toContain('application/problem+json');
    expect(none.body.code).toBe('unauthenticated');
    const bad = await anon.withKey('flk_not-a-real-key').get('/api/v1/api-keys');
    expect(bad.status).toBe(401);
  });

  it('creates a key shown once, lists it without the secret, and revokes it immediately', async () => {
    const created = await a.api.post('/api/v1/api-keys', { name: 'line 3', role: 'viewer' });
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^flk_/);
    const list = await a.api.get('/api/v1/api-keys');
    expect(JSON.stringify(list.body)).not.toContain(created.body.secret);
    const viewer = a.api.withKey(created.body.secret);
    expect((await viewer.get('/api/v1/api-keys')).status).toBe(200);
    expect((await viewer.post('/api/v1/api-keys', { name: 'x' })).status).toBe(403);
    expect((await a.api.delete(`/api/v1/api-keys/${created.body.api_key.id}`)).status).toBe(200);
    expect((await viewer.get('/api/v1/api-keys')).status).toBe(401);
  });

  it("cannot revoke another account's key: 404 as for a missing one", async () => {
    const res = await b.api.delete(`/api/v1/api-keys/${a.apiKeyId}`);
    expect(res.status).toBe(404);
    expect((await a.api.get('/api/v1/api-keys')).status).toBe(200);
  });

  it('answers 400 for malformed JSON, 415 for a wrong content type, 413 for a huge body', async () => {
    const malformed = await a.api.request('POST', '/api/v1/api-keys', {
      rawBody: '{"name":',
      headers: { 'content-type': 'application/json' },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('malformed_json');
    const text = await a.api.request('POST', '/api/v1/api-keys', {
      rawBody: 'name=x',
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.status).toBe(415);
    const huge = await a.api.request('POST', '/api/v1/api-keys', {
      rawBody: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(huge.status).toBe(413);
  });

  it('rejects unknown fields with 422 and field errors', async () => {
    const res = await a.api.post('/api/v1/api-keys', { name: 'k', role: 'owner' });
    expect(res.status).toBe(422);
    expect(res.body.errors[0].field).toBe('role');
  });

  it('logs a user in with a session cookie and refuses cookie writes without the CSRF token', async () => {
    const anon = new ApiClient(server.service.httpUrl);
    const wrong = await anon.post('/api/v1/session', { email: a.adminEmail, password: 'nope' });
    const unknown = await anon.post('/api/v1/session', { email: 'nobody@example.test', password: 'nope' });
    expect(wrong.status).toBe(401);
    expect(unknown.body.detail).toBe(wrong.body.detail);
    const login = await anon.post('/api/v1/session', { email: a.adminEmail, password: a.adminPassword });
    expect(login.status).toBe(201);
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    expect(login.headers.get('set-cookie')).toContain('HttpOnly');
    expect((await anon.get('/api/v1/api-keys', { cookie })).status).toBe(200);
    expect((await anon.post('/api/v1/api-keys', { name: 'x' }, { cookie })).status).toBe(403);
    const ok = await anon.post('/api/v1/api-keys', { name: 'x' }, { cookie, 'x-csrf-token': login.body.csrf_token });
    expect(ok.status).toBe(201);
  });

  it('locks an e-mail out after 10 failed logins with 429', async () => {
    const anon = new ApiClient(server.service.httpUrl);
    const email = b.adminEmail;
    for (let i = 0; i < 10; i++)
      expect((await anon.post('/api/v1/session', { email, password: 'wrong' })).status).toBe(401);
    const locked = await anon.post('/api/v1/session', { email, password: b.adminPassword });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('serves an OpenAPI 3.1 document without authentication', async () => {
    const res = await new ApiClient(server.service.httpUrl).get('/api/v1/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body.paths['/api/v1/api-keys'].post).toBeDefined();
  });
});
