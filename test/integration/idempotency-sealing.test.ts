import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';

/** A retried claim replays the device passwords, but the stored copy never holds them in plain text. */
describe('idempotent responses are stored sealed', () => {
  let server: TestServer;
  let account: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    await buildModel(account, 'LX-200');
  });
  afterAll(async () => ifStarted(server)?.close());

  it('replays the passwords to the retry and keeps none readable in the database', async () => {
    const body = { serials: ['SEAL-1', 'SEAL-2'], model: 'LX-200' };
    const first = await account.api.post('/api/v1/devices/claim', body, { 'idempotency-key': 'claim-seal-1' });
    expect(first.status).toBe(201);
    const passwords = (first.body.devices as Array<{ credentials: { password: string } }>).map(
      (d) => d.credentials.password,
    );
    expect(passwords.every((p) => typeof p === 'string' && p.length >= 32)).toBe(true);

    const rows = await server.service.database.knex('idempotency_keys').where({ key: 'claim-seal-1' });
    const stored = JSON.stringify(rows);
    for (const password of passwords) expect(stored).not.toContain(password);

    const retry = await account.api.post('/api/v1/devices/claim', body, { 'idempotency-key': 'claim-seal-1' });
    expect(retry.status).toBe(201);
    expect(
      (retry.body.devices as Array<{ credentials: { password: string } }>).map((d) => d.credentials.password),
    ).toEqual(passwords);
  });
});
