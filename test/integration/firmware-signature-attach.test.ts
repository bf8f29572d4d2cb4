import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, serials, setReported } from '../helpers/factories';
import { newSigningKey, signFirmware, uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';

/**
 * PUT /api/v1/firmware/versions/:id/signature on the wire, and the 422 firmware_unsigned a deploy
 * of an unsigned version answers once the account has a signing key (problem+json). The rules
 * themselves, rollbacks, retries and claims included: test/services/firmware-signatures.test.ts.
 */
describe('attaching a signature to a stored version over REST', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  const key = newSigningKey();

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(b, 'LX-200');
    await claimDevices(a, { serials: serials('WS', 2), model: 'LX-200' });
    await setReported(server.service.database.knex, {
      accountId: a.accountId,
      serials: serials('WS', 2),
      state: { firmware: '0.9.0' },
    });
  }, 60_000);
  afterAll(() => ifStarted(server)?.close());

  it('a version uploaded before the key cannot be deployed (422 firmware_unsigned) until a signature is attached with PUT .../signature', async () => {
    const uploaded = await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', expectStatus: 201 });
    const id: string = uploaded.body.firmware_version.id;
    const signature = signFirmware(key.privateKey, uploaded.bytes);
    expect(
      (await a.api.request('PUT', '/api/v1/firmware/signing-key', { body: { public_key: key.publicPem } })).status,
    ).toBe(200);
    // Re-uploading it is no way out: the version exists.
    expect(
      (await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', bytes: uploaded.bytes, signature: key.privateKey }))
        .status,
    ).toBe(409);

    const deploy = { firmware_version: '1.0.0', filter: { model: 'LX-200' } };
    for (const body of [deploy, { ...deploy, dry_run: true }]) {
      const refused = await a.api.post('/api/v1/firmware/deploy', body);
      expect(refused.status, JSON.stringify(refused.body)).toBe(422);
      expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(refused.body).toMatchObject({
        status: 422,
        code: 'firmware_unsigned',
        versions: ['1.0.0'],
        firmware_version_ids: [id],
        key_id: key.keyId,
      });
      expect(refused.body.detail).toMatch(/Firmware 1\.0\.0 is not signed.*Attach a signature/);
    }
    expect((await a.api.get('/api/v1/firmware/deployments')).body.deployments).toEqual([]);

    const put = (account: TestAccount, versionId: string, body: unknown) =>
      account.api.request('PUT', `/api/v1/firmware/versions/${versionId}/signature`, { body });
    const bad = await put(a, id, { signature: signFirmware(newSigningKey().privateKey, uploaded.bytes) });
    expect([bad.status, bad.body.code, bad.body.errors[0].field]).toEqual([422, 'signature_invalid', 'signature']);
    expect(bad.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await put(a, id, {})).body.code).toBe('validation_failed');
    expect((await put(a, id, { signature, extra: 1 })).body.code).toBe('validation_failed');
    // Another account's version, an unknown one: 404 alike.
    expect((await put(b, id, { signature })).status).toBe(404);
    expect((await put(a, '00000000-0000-4000-8000-000000000000', { signature })).status).toBe(404);
    expect((await a.api.get(`/api/v1/firmware/versions/${id}`)).body.firmware_version.signed).toBe(false);

    const signed = await put(a, id, { signature });
    expect(signed.status, JSON.stringify(signed.body)).toBe(200);
    expect(signed.body.firmware_version).toMatchObject({ id, signed: true, key_id: key.keyId, signature });
    expect((await put(a, id, { signature })).body).toEqual(signed.body);

    const deployed = await a.api.post('/api/v1/firmware/deploy', deploy);
    expect(deployed.status, JSON.stringify(deployed.body)).toBe(202);
    expect(deployed.body.target_count).toBe(2);
  });
});
