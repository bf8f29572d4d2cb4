import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { createHttpSender } from '../../api/src/domain/webhooks/webhook-sender';
import { isPrivateAddress } from '../../api/src/domain/webhooks/url-guard';
import { retryDelayMs, RETRY_WINDOW_MS } from '../../api/src/domain/webhooks/backoff';
import { startReceiver } from './receiver';

describe('webhook receivers: SSRF guard, timeout, backoff', () => {
  let server: TestServer;
  let account: TestAccount;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    // The production default: private receivers refused.
    server = await startTestServer({ env: { WEBHOOK_ALLOW_PRIVATE: 'false' } });
    account = await server.createAccount();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.close();
  });

  it('refuses loopback, private, link-local and metadata receivers unless allowed', async () => {
    for (const url of [
      'http://127.0.0.1:8080/x', 'http://localhost/x', 'http://app.localhost/x', 'http://10.1.2.3/x', 'http://192.168.1.1/x',
      'http://172.20.0.1/x', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/x', 'http://[::ffff:127.0.0.1]/x',
      'http://[fd00::1]/x', 'http://0.0.0.0/x', 'http://100.64.0.1/x', 'http://user:pw@example.com/x',
    ]) {
      const res = await account.api.post('/api/v1/webhooks', { url, event_types: ['device.online'] });
      expect(res.status, url).toBe(422);
      expect(res.body.errors[0].field).toBe('url');
    }
    expect((await account.api.get('/api/v1/webhooks')).body.webhooks).toHaveLength(0);
    const ok = await account.api.post('/api/v1/webhooks', { url: 'https://hooks.example.com/fleet', event_types: ['device.online'] });
    expect(ok.status).toBe(201);
  });

  it('checks the resolved address of every connection (a name that resolves to loopback is refused)', async () => {
    const sender = createHttpSender({ timeoutMs: 2000, allowPrivate: false });
    const viaName = await sender({ url: `http://localhost:${receiver.port}/hooks`, body: '{}', headers: {} });
    expect(viaName.statusCode).toBeNull();
    expect(viaName.error).toMatch(/private address/);
    const literal = await sender({ url: `http://127.0.0.1:${receiver.port}/hooks`, body: '{}', headers: {} });
    expect(literal.error).toMatch(/refused/);
    expect(receiver.received).toHaveLength(0);
    expect(isPrivateAddress('8.8.8.8')).toBe(false);
    expect(isPrivateAddress('2606:4700::1111')).toBe(false);
  });

  it('does not follow redirects and cuts off a hanging receiver', async () => {
    const sender = createHttpSender({ timeoutMs: 300, allowPrivate: true });
    receiver.setMode('redirect');
    const redirected = await sender({ url: receiver.url, body: '{"a":1}', headers: { 'content-type': 'application/json' } });
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
