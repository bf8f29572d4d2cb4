import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { createHttpSender } from '#core/webhooks/webhook-sender';
import { isPrivateAddress } from '#core/webhooks/url-guard';
import net from 'node:net';
import { retryDelayMs, RETRY_WINDOW_MS } from '#core/webhooks/backoff';
import { startReceiver } from './receiver';
import { ifStarted } from '../helpers/teardown';

describe('webhook receivers: SSRF guard, timeout, backoff', () => {
  let server: TestServer;
  let account: TestAccount;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    // The production default: private receivers refused. DNS answers are pinned for the names
    // below; any other name does not resolve (as in a sandbox without DNS).
    const zone: Record<string, string[]> = {
      'loopback.hooks.test': ['127.0.0.1'],
      'metadata.hooks.test': ['169.254.169.254'],
      'mixed.hooks.test': ['93.184.216.34', '10.0.0.7'],
      'public.hooks.test': ['93.184.216.34', '2606:2800:220:1::1'],
    };
    server = await startTestServer({
      env: { WEBHOOK_ALLOW_PRIVATE: 'false' },
      resolveHost: (name) => {
        const addresses = zone[name];
        if (!addresses)
          return Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' }));
        return Promise.resolve(addresses);
      },
    });
    account = await server.createAccount();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await ifStarted(receiver)?.close();
    await ifStarted(server)?.close();
  });

  it('refuses loopback, private, link-local and metadata receivers unless allowed', async () => {
    for (const url of [
      'http://127.0.0.1:8080/x',
      'http://localhost/x',
      'http://app.localhost/x',
      'http://10.1.2.3/x',
      'http://192.168.1.1/x',
      'http://172.20.0.1/x',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/x',
      'http://[::ffff:127.0.0.1]/x',
      'http://[fd00::1]/x',
      'http://0.0.0.0/x',
      'http://100.64.0.1/x',
      'http://user:pw@example.com/x',
    ]) {
      const res = await account.api.post('/api/v1/webhooks', { url, event_types: ['device.online'] });
      expect(res.status, url).toBe(422);
      expect(res.body.errors[0].field).toBe('url');
    }
    expect((await account.api.get('/api/v1/webhooks')).body.webhooks).toHaveLength(0);
    const ok = await account.api.post('/api/v1/webhooks', {
      url: 'https://hooks.example.com/fleet',
      event_types: ['device.online'],
    });
    expect(ok.status).toBe(201);
  });

  it('refuses IPv4-embedded IPv6 literals and trailing-dot local names at creation', async () => {
    const failures: string[] = [];
    for (const url of [
      'http://[::127.0.0.1]/x',
      'http://[::7f00:1]/x',
      'http://[64:ff9b::7f00:1]/x',
      'http://[64:ff9b::127.0.0.1]/x',
      'http://[::ffff:0:7f00:1]/x',
      'http://[::ffff:0:127.0.0.1]/x',
      'http://[64:ff9b::a9fe:a9fe]/x',
      'http://[::ffff:a00:1]/x',
      'http://[2002:7f00:1::1]/x',
      'http://[64:ff9b:1::1]/x',
      'http://[0:0:0:0:0:ffff:7f00:1]/x',
      'http://localhost./x',
      'http://LOCALHOST./x',
      'http://app.localhost./x',
      'http://LocalHost.LocalDomain./x',
      'http://127.0.0.1./x',
    ]) {
      const res = await account.api.post('/api/v1/webhooks', { url, event_types: ['device.online'] });
      if (res.status !== 422 || res.body.errors?.[0]?.field !== 'url') failures.push(`${url}: ${res.status}`);
    }
    expect(failures).toEqual([]);
    for (const address of [
      '::7f00:1',
      '::127.0.0.1',
      '64:ff9b::7f00:1',
      '::ffff:0:7f00:1',
      '::ffff:7f00:1',
      '2002:a9fe:a9fe::',
      '::',
      '::1',
    ]) {
      expect(isPrivateAddress(address), address).toBe(true);
    }
    for (const address of ['8.8.8.8', '2606:4700::1111', '64:ff9b::808:808', '::ffff:808:808', '2002:808:808::1']) {
      expect(isPrivateAddress(address), address).toBe(false);
    }
  });

  it('resolves names at creation and refuses one with any internal address, without echoing it', async () => {
    for (const name of ['loopback.hooks.test', 'metadata.hooks.test', 'mixed.hooks.test', 'LOOPBACK.hooks.test.']) {
      const res = await account.api.post('/api/v1/webhooks', {
        url: `https://${name}/fleet`,
        event_types: ['device.online'],
      });
      expect(res.status, name).toBe(422);
      expect(res.body.errors[0].field).toBe('url');
      expect(JSON.stringify(res.body), name).not.toMatch(/127\.0\.0\.1|169\.254|10\.0\.0\.7/);
    }
    const created = await account.api.post('/api/v1/webhooks', {
      url: 'https://public.hooks.test/fleet',
      event_types: ['device.online'],
    });
    expect(created.status).toBe(201);
    // A name that does not resolve (yet) is accepted: every connection is checked when sending.
    const unresolved = await account.api.post('/api/v1/webhooks', {
      url: 'https://not-yet.hooks.test/fleet',
      event_types: ['device.online'],
    });
    expect(unresolved.status).toBe(201);
    const moved = await account.api.patch(`/api/v1/webhooks/${created.body.webhook.id}`, {
      url: 'https://loopback.hooks.test/fleet',
    });
    expect(moved.status).toBe(422);
    for (const id of [created.body.webhook.id, unresolved.body.webhook.id])
      expect((await account.api.delete(`/api/v1/webhooks/${id}`)).status).toBe(204);
  });

  it('checks the resolved address of every connection and never echoes addresses in delivery errors', async () => {
    const sender = createHttpSender({ timeoutMs: 2000, allowPrivate: false });
    for (const url of [
      `http://localhost:${receiver.port}/hooks`,
      `http://127.0.0.1:${receiver.port}/hooks`,
      `http://[::7f00:1]:${receiver.port}/hooks`,
      `http://localhost.:${receiver.port}/hooks`,
    ]) {
      const result = await sender({ url, body: '{}', headers: {} });
      expect(result, url).toMatchObject({ statusCode: null, error: 'destination not allowed' });
    }
    expect(receiver.received).toHaveLength(0);
    // Allowed destinations that fail say how, not where (no resolved address, no port).
    const closed = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as net.AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const refused = await createHttpSender({ timeoutMs: 2000, allowPrivate: true })({
      url: `http://localhost:${closed}/hooks`,
      body: '{}',
      headers: {},
    });
    expect(refused).toMatchObject({ statusCode: null, error: 'connection refused' });
  });

  it('does not follow redirects and cuts off a hanging receiver', async () => {
    const sender = createHttpSender({ timeoutMs: 300, allowPrivate: true });
    receiver.setMode('redirect');
    const redirected = await sender({
      url: receiver.url,
      body: '{"a":1}',
      headers: { 'content-type': 'application/json' },
    });
    expect(redirected).toMatchObject({ statusCode: 302, error: 'redirect refused (302)' });
    receiver.setMode('hang');
    const hung = await sender({ url: receiver.url, body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(hung.statusCode).toBeNull();
    expect(hung.error).toMatch(/timed out after 300 ms/);
    expect(hung.durationMs).toBeLessThan(2000);
    receiver.setMode('up');
  });

  it('backs off exponentially with jitter: first retry within 10 s, retries spanning more than 24 hours', () => {
    for (let i = 0; i < 50; i++) {
      const first = retryDelayMs(1);
      expect(first).toBeGreaterThanOrEqual(2500);
      expect(first).toBeLessThanOrEqual(5000);
    }
    expect(retryDelayMs(1, () => 0)).not.toBe(retryDelayMs(1, () => 1));
    let elapsed = 0;
    let attempts = 0;
    while (elapsed < RETRY_WINDOW_MS) elapsed += retryDelayMs(++attempts, () => 1);
    expect(RETRY_WINDOW_MS).toBeGreaterThan(24 * 60 * 60_000);
    expect(attempts).toBeGreaterThan(12);
    expect(retryDelayMs(40, () => 1)).toBe(6 * 60 * 60_000);
  });
});
