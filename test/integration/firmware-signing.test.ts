import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { newSigningKey, sha256, signFirmware, uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';

/**
 * Signed firmware over REST: the account registers the public half of an Ed25519 key, and from
 * then on an upload must carry a signature over the file's SHA-256 digest, or nothing is stored.
 */
describe('firmware signing key and signed uploads', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let viewer: TestAccount;
  const key1 = newSigningKey();
  const key2 = newSigningKey();
  const firmwareDir = () => path.join(server.config.dataDir, 'firmware');
  const putKey = (account: TestAccount, body: unknown) =>
    account.api.request('PUT', '/api/v1/firmware/signing-key', { body });
  const versions = async (account: TestAccount) =>
    (await account.api.get('/api/v1/firmware/versions?model=LX-200')).body.versions as Array<{
      version: string;
      signed: boolean;
      key_id: string | null;
    }>;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(b, 'LX-200');
    const key = await a.api.post('/api/v1/api-keys', { name: 'ro', role: 'viewer' });
    viewer = { ...a, api: a.api.withKey(key.body.secret) };
  }, 60_000);
  afterAll(() => ifStarted(server)?.close());

  it('without a key, uploads stay unsigned, and a signature is refused instead of being dropped', async () => {
    expect((await a.api.get('/api/v1/firmware/signing-key')).body).toEqual({ signing_key: null, retired_keys: [] });
    const plain = await uploadFirmware(a, { model: 'LX-200', version: '0.9.0', expectStatus: 201 });
    expect(plain.body.firmware_version).toMatchObject({ signed: false, key_id: null, signature: null });
    const withSignature = await uploadFirmware(a, { model: 'LX-200', version: '0.9.1', signature: key1.privateKey });
    expect([withSignature.status, withSignature.body.code]).toEqual([422, 'signature_invalid']);
    expect((await versions(a)).map((v) => v.version)).toEqual(['0.9.0']);
  });

  it('registers an Ed25519 public key (admin only) and shows it with its key id; another account does not see it', async () => {
    expect((await putKey(viewer, { public_key: key1.publicPem })).status).toBe(403);
    const put = await putKey(a, { public_key: key1.publicPem });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body.signing_key).toMatchObject({
      key_id: key1.keyId,
      algorithm: 'ed25519',
      public_key: key1.publicPem,
      retired_at: null,
    });
    expect(put.body.retired_keys).toEqual([]);
    // Viewers read it (a public key is no secret); the other account has none.
    expect((await viewer.api.get('/api/v1/firmware/signing-key')).body.signing_key.key_id).toBe(key1.keyId);
    expect((await b.api.get('/api/v1/firmware/signing-key')).body).toEqual({ signing_key: null, retired_keys: [] });
    // So the other account's uploads stay unsigned.
    const other = await uploadFirmware(b, { model: 'LX-200', version: '1.0.0', expectStatus: 201 });
    expect(other.body.firmware_version.signed).toBe(false);
  });

  it('refuses what is not a PEM Ed25519 public key with 422 invalid_signing_key, a private key included', async () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' });
    const privatePem = key1.privateKey.export({ type: 'pkcs8', format: 'pem' });
    for (const public_key of [
      rsa,
      ec,
      privatePem,
      'not a key',
      '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----',
    ]) {
      const res = await putKey(a, { public_key });
      expect([res.status, res.body.code], String(public_key).slice(0, 40)).toEqual([422, 'invalid_signing_key']);
    }
    const res = await putKey(a, { public_key: privatePem });
    expect(res.body.detail).toMatch(/private key/);
    // The field errors name the body's field, not the domain input's (`publicKey`).
    expect(res.body.errors).toEqual([{ field: 'public_key', message: res.body.detail }]);
    expect((await putKey(a, {})).status).toBe(422);
    // Nothing changed.
    expect((await a.api.get('/api/v1/firmware/signing-key')).body.signing_key.key_id).toBe(key1.keyId);
  });

  it('stores an upload signed with the key as signed, with the key id, whether the signature comes before or after the file', async () => {
    const bytes = randomBytes(5000);
    const before = await uploadFirmware(a, {
      model: 'LX-200',
      version: '1.0.0',
      bytes,
      signature: key1.privateKey,
      expectStatus: 201,
    });
    expect(before.body.firmware_version).toMatchObject({
      signed: true,
      key_id: key1.keyId,
      signature: signFirmware(key1.privateKey, bytes),
      sha256: sha256(bytes),
    });
    const after = await uploadFirmware(a, {
      model: 'LX-200',
      version: '1.0.1',
      signature: key1.privateKey,
      signatureAfterFile: true,
      expectStatus: 201,
    });
    expect(after.body.firmware_version).toMatchObject({ signed: true, key_id: key1.keyId });
    const read = await a.api.get(`/api/v1/firmware/versions/${before.body.firmware_version.id}`);
    expect(read.body.firmware_version).toMatchObject({ signed: true, key_id: key1.keyId });
  });

  it('refuses a missing, malformed or wrong signature with 422 signature_invalid and stores nothing (no row, no file)', async () => {
    const filesBefore = readdirSync(firmwareDir()).sort();
    const listBefore = await versions(a);
    const bytes = randomBytes(3000);
    const cases: Array<{ name: string; signature?: string; signatureAfterFile?: boolean }> = [
      { name: 'missing' },
      { name: 'empty', signature: '' },
      { name: 'not base64', signature: 'not a signature!' },
      { name: 'too short', signature: Buffer.alloc(32).toString('base64') },
      { name: 'by another key', signature: signFirmware(key2.privateKey, bytes) },
      { name: 'of another file', signature: signFirmware(key1.privateKey, randomBytes(3000)) },
      {
        name: 'of another file, after the file part',
        signature: signFirmware(key1.privateKey, randomBytes(3000)),
        signatureAfterFile: true,
      },
    ];
    for (const c of cases) {
      const res = await uploadFirmware(a, {
        model: 'LX-200',
        version: '2.0.0',
        bytes,
        ...(c.signature !== undefined ? { signature: c.signature } : {}),
        ...(c.signatureAfterFile ? { signatureAfterFile: true } : {}),
      });
      expect([res.status, res.body.code], c.name).toEqual([422, 'signature_invalid']);
      expect(res.body.errors[0].field).toBe('signature');
    }
    expect(await versions(a)).toEqual(listBefore);
    expect(readdirSync(firmwareDir()).sort()).toEqual(filesBefore);
    // The same version is still free: nothing was recorded for it.
    await uploadFirmware(a, {
      model: 'LX-200',
      version: '2.0.0',
      bytes,
      signature: key1.privateKey,
      expectStatus: 201,
    });
  });

  it('a new key rotates: uploads need the new key, versions signed with the old one stay valid under its id', async () => {
    const put = await putKey(a, { public_key: key2.publicPem });
    expect(put.status).toBe(200);
    expect(put.body.signing_key).toMatchObject({ key_id: key2.keyId, retired_at: null });
    expect(put.body.retired_keys).toHaveLength(1);
    expect(put.body.retired_keys[0]).toMatchObject({ key_id: key1.keyId, public_key: key1.publicPem });
    expect(put.body.retired_keys[0].retired_at).toEqual(expect.any(String));
    // Registering the current key again changes nothing.
    const again = await putKey(a, { public_key: key2.publicPem });
    expect(again.body).toEqual(put.body);

    const old = await uploadFirmware(a, { model: 'LX-200', version: '3.0.0', signature: key1.privateKey });
    expect([old.status, old.body.code]).toEqual([422, 'signature_invalid']);
    const fresh = await uploadFirmware(a, {
      model: 'LX-200',
      version: '3.0.0',
      signature: key2.privateKey,
      expectStatus: 201,
    });
    expect(fresh.body.firmware_version).toMatchObject({ signed: true, key_id: key2.keyId });
    const byVersion = Object.fromEntries((await versions(a)).map((v) => [v.version, v]));
    expect(byVersion['1.0.0']).toMatchObject({ signed: true, key_id: key1.keyId });
    expect(byVersion['3.0.0']).toMatchObject({ signed: true, key_id: key2.keyId });
    expect(byVersion['0.9.0']).toMatchObject({ signed: false, key_id: null });
  });
});
