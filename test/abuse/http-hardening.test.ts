import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { collect, gql, wsClient } from '../graphql/graphql-client';
import { ApiClient } from '../helpers/api-client';
import { ifStarted } from '../helpers/teardown';

const METRICS_TOKEN = 'scrape-token-0123456789abcdef';

/**
 * Edges of the HTTP port an attacker reaches first: response headers that keep browsers from
 * sniffing, framing or leaking referrers; the metrics endpoint behind an optional token; and
 * GraphQL aliases, which must not turn one rate-limit unit into many mutations.
 */
describe('HTTP hardening: headers, metrics token, mutations per rate-limit unit', () => {
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  /** More admin keys of the account (the first one ends up over its limit). */
  const keys: Array<{ id: string; secret: string }> = [];

  beforeAll(async () => {
    server = await startTestServer({ env: { METRICS_TOKEN } });
    account = await server.createAccount({ quota: 100 });
    url = server.service.httpUrl;
    await buildModel(account);
    for (const name of ['claims', 'ws']) {
      const created = await account.api.post('/api/v1/api-keys', { name, role: 'admin' });
      keys.push({ id: created.body.api_key.id, secret: created.body.secret });
    }
  });
  afterAll(async () => ifStarted(server)?.close());

  it('sends nosniff, no-referrer and no-framing headers on API, GraphQL, probe and error answers', async () => {
    const anon = new ApiClient(url);
    const answers = [
      await account.api.get('/api/v1/api-keys'),
      await anon.get('/api/v1/devices'),
      await anon.get('/healthz'),
      await anon.get('/no/such/path'),
      await anon.get('/firmware/download/%C0%AF?e=1&s=x'),
    ];
    const graph = await gql(url, '{ viewer { accountId } }', { apiKey: account.apiKey });
    for (const headers of [...answers.map((a) => a.headers), graph.headers]) {
      expect(headers.get('x-content-type-options')).toBe('nosniff');
      expect(headers.get('referrer-policy')).toBe('no-referrer');
      expect(headers.get('x-frame-options')).toBe('DENY');
      expect(headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(headers.get('x-powered-by')).toBeNull();
    }
  });

  it('requires the bearer token for /metrics when METRICS_TOKEN is set', async () => {
    const anon = new ApiClient(url);
    const none = await anon.get('/metrics');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(none.headers.get('content-type')).toMatch(/problem\+json/);
    expect(JSON.stringify(none.body)).not.toContain('fleet_http_requests_total');
    expect((await anon.get('/metrics', { authorization: 'Bearer wrong-token-0123456789abcdef' })).status).toBe(401);
    // An API key is no metrics credential.
    expect((await account.api.get('/metrics')).status).toBe(401);
    const ok = await anon.get('/metrics', { authorization: `Bearer ${METRICS_TOKEN}` });
    expect(ok.status).toBe(200);
    expect(ok.body).toContain('fleet_http_requests_total');
  });

  it('charges one rate-limit unit per top-level mutation field: 15 aliased claims are 15 units', async () => {
    const claims = Array.from(
      { length: 15 },
      (_, i) => `c${i}: claimDevices(input: { serials: ["ALIAS-${i}"], model: "LX-200" }) { count }`,
    ).join('\n');
    await server.service.services.apiKeys.setRateLimit(account.apiKeyId, 10);
    const refused = await gql(url, `mutation {\n${claims}\n}`, { apiKey: account.apiKey });
    expect(refused.status).toBe(429);
    expect(refused.body.errors[0].extensions.code).toBe('rate_limited');
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(refused.body.data ?? null).toBeNull();
    expect(
      (
        await server.service.database
          .knex('devices')
          .where({ account_id: account.accountId })
          .count<{ count: string }[]>('* as count')
      )[0]!.count,
    ).toBe(0);

    // Within the limit they run, and the remaining allowance drops by 15, not by 1.
    const fresh = keys[0]!;
    await server.service.services.apiKeys.setRateLimit(fresh.id, 100);
    const ran = await gql(url, `mutation {\n${claims}\n}`, { apiKey: fresh.secret });
    expect(ran.body.errors).toBeUndefined();
    expect(Object.keys(ran.body.data)).toHaveLength(15);
    expect(ran.headers.get('ratelimit-remaining')).toBe('85');
    const next = await gql(url, '{ viewer { accountId } }', { apiKey: fresh.secret });
    expect(next.headers.get('ratelimit-remaining')).toBe('84');
  });

  it('charges aliased mutations over graphql-ws the same way', async () => {
    const key = keys[1]!;
    await server.service.services.apiKeys.setRateLimit(key.id, 5);
    const models = Array.from(
      { length: 8 },
      (_, i) => `m${i}: registerModel(input: { name: "WS-${i}" }) { name }`,
    ).join('\n');
    const client = wsClient(url, { apiKey: key.secret });
    try {
      const sub = collect(client, `mutation {\n${models}\n}`);
      await expect(sub.until(() => false, 2000)).rejects.toThrow(/ended/);
      expect(JSON.stringify([...sub.items, ...sub.errors])).toContain('rate_limited');
    } finally {
      await client.dispose();
    }
    expect(
      await server.service.database
        .knex('models')
        .where({ account_id: account.accountId })
        .where('name', 'like', 'WS-%'),
    ).toHaveLength(0);
  });
});
