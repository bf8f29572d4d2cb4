import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { X509Certificate } from 'node:crypto';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, claimDevices } from '../helpers/factories';
import { makeCsr } from '../helpers/certificates';
import { sha256Hex } from '#core/shared/secrets';
import { ifStarted } from '../helpers/teardown';

/**
 * An Idempotency-Key names one request: operation, path and body. The same key and body on
 * another path (another device's certificates) is another request, refused with 422, never
 * answered with the first request's stored response (issue 24, item 5: device Y was answered
 * with device X's certificate, CN=X, and nothing was issued for Y).
 */
describe('Idempotency-Key: the stored request includes its path', () => {
  let server: TestServer;
  let a: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    await buildModel(a, 'LX-200');
    await claimDevices(a, { serials: ['PATH-X', 'PATH-Y', 'PATH-Z', 'PATH-W'], model: 'LX-200' });
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const knex = () => server.service.database.knex;
  const certificatesOf = async (serial: string) =>
    (await a.api.get(`/api/v1/devices/${serial}/certificates`)).body.certificates as Array<{ certificate: string }>;
  const subject = (pem: string) => new X509Certificate(pem).subject;

  it("the same key and CSR for device Y: 422 idempotency_key_reused, no certificate of X's for Y; X's replay unchanged", async () => {
    const csr = (await makeCsr()).pem;
    const headers = { 'Idempotency-Key': 'line3-cert-0001' };
    const forX = await a.api.post('/api/v1/devices/PATH-X/certificates', { csr }, headers);
    expect(forX.status, JSON.stringify(forX.body)).toBe(201);
    expect(subject(forX.body.certificate)).toBe('CN=PATH-X');

    const forY = await a.api.post('/api/v1/devices/PATH-Y/certificates', { csr }, headers);
    expect(forY.status, JSON.stringify(forY.body)).toBe(422);
    expect(forY.body.code).toBe('idempotency_key_reused');
    expect(forY.headers.get('idempotent-replayed')).toBeNull();
    expect(JSON.stringify(forY.body)).not.toContain(forX.body.fingerprint_sha256);
    expect(await certificatesOf('PATH-Y')).toEqual([]);

    // The first request's retry still gets its own answer, and X has exactly that one certificate.
    const replayX = await a.api.post('/api/v1/devices/PATH-X/certificates', { csr }, headers);
    expect(replayX.status).toBe(201);
    expect(replayX.headers.get('idempotent-replayed')).toBe('true');
    expect(replayX.body).toEqual(forX.body);
    expect((await certificatesOf('PATH-X')).map((c) => subject(c.certificate))).toEqual(['CN=PATH-X']);

    // Y gets its certificate with a key of its own.
    const ownKey = await a.api.post(
      '/api/v1/devices/PATH-Y/certificates',
      { csr },
      { 'Idempotency-Key': 'line3-cert-0002' },
    );
    expect(ownKey.status).toBe(201);
    expect(subject(ownKey.body.certificate)).toBe('CN=PATH-Y');
  });

  it("a claim's key used on a certificate path is refused (another operation)", async () => {
    const claimKey = { 'Idempotency-Key': 'line3-claim-0001' };
    const claim = await a.api.post('/api/v1/devices/claim', { serials: ['PATH-C1'], model: 'LX-200' }, claimKey);
    expect(claim.status).toBe(201);
    const csr = (await makeCsr()).pem;
    const other = await a.api.post('/api/v1/devices/PATH-Z/certificates', { csr }, claimKey);
    expect(other.status).toBe(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(await certificatesOf('PATH-Z')).toEqual([]);
  });

  /**
   * Rows stored before the path was part of the request (hash of operation and body only): a
   * claim's (no path parameters) hashes as before and keeps replaying; a certificate request's
   * cannot tell which device it was for, so it is refused (422) until it expires (24 h).
   */
  it('rows stored by the previous version: claims still replay, certificate requests are refused', async () => {
    const claimBody = { serials: ['PATH-LEGACY-1'], model: 'LX-200' };
    const claim = await a.api.post('/api/v1/devices/claim', claimBody, { 'Idempotency-Key': 'legacy-claim' });
    expect(claim.status).toBe(201);
    const row = await knex()('idempotency_keys').where({ account_id: a.accountId, key: 'legacy-claim' }).first();
    // The previous version's hash of this claim: what its row holds.
    expect(row.request_hash).toBe(sha256Hex(`claimDevices\n${JSON.stringify(claimBody)}`));
    const retry = await a.api.post('/api/v1/devices/claim', claimBody, { 'Idempotency-Key': 'legacy-claim' });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body).toEqual(claim.body);

    // A certificate request stored by the previous version, for device X.
    const csr = (await makeCsr()).pem;
    const issued = await a.api.post('/api/v1/devices/PATH-W/certificates', { csr });
    expect(issued.status).toBe(201);
    await knex()('idempotency_keys').insert({
      account_id: a.accountId,
      key: 'legacy-cert',
      principal: row.principal,
      operation: 'issueDeviceCertificate',
      request_hash: sha256Hex(`issueDeviceCertificate\n${JSON.stringify({ csr })}`),
      state: 'done',
      response_status: 201,
      response_body: JSON.stringify(issued.body),
      created_at: new Date(),
    });
    for (const serial of ['PATH-W', 'PATH-Y']) {
      const res = await a.api.post(
        `/api/v1/devices/${serial}/certificates`,
        { csr },
        { 'Idempotency-Key': 'legacy-cert' },
      );
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('idempotency_key_reused');
    }
  });
});
