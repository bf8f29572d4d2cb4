import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/test-server';
import { ApiClient, type ApiResponse } from '../helpers/api-client';
import { ManualClock } from '#core/shared/clock';
import { ifStarted } from '../helpers/teardown';

/**
 * Login throttling (README "Login throttling"): per e-mail and client address, 10 failed
 * attempts lock that address out for 15 minutes; per e-mail, from the 20th failure in 24 hours,
 * addresses that have not logged in to it before wait 1 s, doubling up to 5 minutes, between
 * attempts. The service trusts X-Forwarded-For from loopback only (a local proxy), which is
 * how these tests speak from several addresses.
 */
describe('login throttle', () => {
  const clock = new ManualClock('2026-11-25T08:00:00Z');
  let server: TestServer;
  let anon: ApiClient;

  beforeAll(async () => {
    server = await startTestServer({ clock });
    anon = new ApiClient(server.service.httpUrl);
  });
  afterAll(async () => ifStarted(server)?.close());

  const login = (email: string, password: string, address: string): Promise<ApiResponse> =>
    anon.post('/api/v1/session', { email, password }, { 'x-forwarded-for': address });
  const retryAfter = (res: ApiResponse) => Number(res.headers.get('retry-after'));

  it('counts parallel guesses atomically: of 60 at once, 10 are checked and 50 refused', async () => {
    const { adminEmail, adminPassword } = await server.createAccount();
    const answers = await Promise.all(
      Array.from({ length: 60 }, () => login(adminEmail, 'wrong password', '203.0.113.9')),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(50);
    for (const refused of answers.filter((r) => r.status === 429)) {
      expect(refused.body.code).toBe('too_many_login_attempts');
      expect(retryAfter(refused)).toBeGreaterThan(0);
    }
    // Locked out from that address, even with the right password.
    expect((await login(adminEmail, adminPassword, '203.0.113.9')).status).toBe(429);
  });

  it('locks out the address that guessed, not the owner elsewhere, for 15 minutes', async () => {
    const { adminEmail, adminPassword } = await server.createAccount();
    for (let i = 0; i < 10; i++) expect((await login(adminEmail, 'wrong password', '203.0.113.10')).status).toBe(401);
    const locked = await login(adminEmail, adminPassword, '203.0.113.10');
    expect(locked.status).toBe(429);
    expect(retryAfter(locked)).toBe(15 * 60);

    expect((await login(adminEmail, adminPassword, '198.51.100.20')).status).toBe(201);

    clock.advance(15 * 60_000);
    expect((await login(adminEmail, adminPassword, '203.0.113.10')).status).toBe(201);
  });

  it('counts an IPv6 /64 as one address', async () => {
    const { adminEmail, adminPassword } = await server.createAccount();
    for (let i = 1; i <= 10; i++)
      expect((await login(adminEmail, 'wrong password', `2001:db8:1:2::${i.toString(16)}`)).status).toBe(401);
    expect((await login(adminEmail, adminPassword, '2001:db8:1:2:ffff:ffff:ffff:ffff')).status).toBe(429);
    expect((await login(adminEmail, adminPassword, '2001:db8:1:3::1')).status).toBe(201);
  });

  it('slows new addresses down once an e-mail has 20 failures, never the owner at a known address', async () => {
    const { adminEmail, adminPassword } = await server.createAccount();
    const home = '198.51.100.30';
    expect((await login(adminEmail, adminPassword, home)).status).toBe(201);

    // One guess from each of 20 addresses: none is locked out on its own.
    for (let i = 0; i < 20; i++)
      expect((await login(adminEmail, 'wrong password', `203.0.113.${100 + i}`)).status).toBe(401);
    const fresh = await login(adminEmail, adminPassword, '192.0.2.1');
    expect(fresh.status).toBe(429);
    expect(fresh.body.code).toBe('too_many_login_attempts');
    expect(retryAfter(fresh)).toBe(1);

    // The backoff doubles with every further failure, up to 5 minutes.
    const waits: number[] = [];
    for (let i = 0; i < 10; i++) {
      const refused = await login(adminEmail, 'wrong password', `203.0.113.${150 + i}`);
      expect(refused.status).toBe(429);
      waits.push(retryAfter(refused));
      clock.advance(retryAfter(refused) * 1000);
      expect((await login(adminEmail, 'wrong password', `203.0.113.${150 + i}`)).status).toBe(401);
    }
    expect(waits).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);

    // Meanwhile the owner logs in from home at once, wrong guesses there count only there.
    expect((await login(adminEmail, 'typo', home)).status).toBe(401);
    expect((await login(adminEmail, adminPassword, home)).status).toBe(201);

    // From a new address the owner waits at most 5 minutes, and is then let in.
    const away = await login(adminEmail, adminPassword, '192.0.2.2');
    expect(away.status).toBe(429);
    expect(retryAfter(away)).toBeLessThanOrEqual(300);
    clock.advance(retryAfter(away) * 1000);
    expect((await login(adminEmail, adminPassword, '192.0.2.2')).status).toBe(201);
  });

  it('prunes throttles a day old but remembers known addresses for 30 days', async () => {
    const { adminEmail, adminPassword } = await server.createAccount();
    expect((await login(adminEmail, adminPassword, '198.51.100.40')).status).toBe(201);
    expect((await login(adminEmail, 'wrong password', '203.0.113.40')).status).toBe(401);
    const rows = () =>
      server.service.database
        .knex('login_address_throttle')
        .where({ email: adminEmail })
        .orderBy('address')
        .pluck('address');
    expect(await rows()).toEqual(['198.51.100.40', '203.0.113.40']);
    clock.advance(2 * 86_400_000);
    await server.service.services.retention.pruneOnce();
    expect(await rows()).toEqual(['198.51.100.40']);
    clock.advance(30 * 86_400_000);
    await server.service.services.retention.pruneOnce();
    expect(await rows()).toEqual([]);
  });
});
