import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { ifStarted } from '../helpers/teardown';

describe('rate limit on the device API: 100 requests per minute per key', () => {
  let server: TestServer;
  let a: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    // Embedded database start and seeding claims can be slow on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it('accepts exactly 100, then answers 429 with Retry-After; another key of the same account is unaffected', async () => {
    const statuses: number[] = [];
    let first: Headers | undefined;
    for (let i = 0; i < 100; i++) {
      const res = await a.api.get('/api/v1/devices?limit=1');
      statuses.push(res.status);
      first ??= res.headers;
    }
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(first!.get('ratelimit-limit')).toBe('100');
    expect(first!.get('ratelimit-remaining')).toBe('99');
    const refused = await a.api.get('/api/v1/devices?limit=1');
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('ratelimit-remaining')).toBe('0');
    expect(Number(refused.headers.get('ratelimit-reset'))).toBeGreaterThan(0);
    // Writes count against the same budget.
    expect((await a.api.post('/api/v1/models', { name: 'LX-1' })).status).toBe(429);

    const other = await server.createAccount();
    const sameAccountKey = await server.service.services.apiKeys.create(
      { accountId: a.accountId, role: 'admin', principal: 'system' },
      { name: 'second line', role: 'admin' },
    );
    const second = a.api.withKey(sameAccountKey.secret);
    const res = await second.get('/api/v1/devices?limit=1');
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit-remaining')).toBe('99');
    expect((await other.api.get('/api/v1/allocation')).status).toBe(200);
  });
});
