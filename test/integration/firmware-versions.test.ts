import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { uploadFirmware, sha256 } from '../ota/ota-helpers';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ifStarted } from '../helpers/teardown';

describe('firmware versions: upload, list, delete', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;

  beforeAll(async () => {
    server = await startTestServer({ env: { MAX_FIRMWARE_BYTES: String(64 * 1024) } });
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(a, 'LX-300');
    await buildModel(b, 'LX-200');
  }, 60_000);
  afterAll(() => ifStarted(server)?.close());

  it('stores the binary, computing sha256 and size, and answers 201 with the record', async () => {
    const bytes = randomBytes(10_000);
    const res = await uploadFirmware(a, { model: 'LX-200', version: '1.4', bytes, expectStatus: 201 });
    expect(res.body.firmware_version).toMatchObject({
      model: 'LX-200',
      version: '1.4',
      size: 10_000,
      sha256: sha256(bytes),
      release_notes: 'Release 1.4',
      file_available: true,
    });
    expect(res.body.firmware_version.id).toMatch(/^[0-9a-f-]{36}$/);
    const stored = path.join(server.config.dataDir, 'firmware', `${res.body.firmware_version.id}.bin`);
    expect(existsSync(stored)).toBe(true);
  });

  it('refuses the same version again, also when written differently (1.4 = 1.4.0): 409', async () => {
    const res = await uploadFirmware(a, { model: 'LX-200', version: '1.4.0' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('already_exists');
    // The same version of another model is fine.
    await uploadFirmware(a, { model: 'LX-300', version: '1.4.0', expectStatus: 201 });
  });

  it('answers 422 unknown_model, 422 invalid_version, 422 for a missing file, 415 for JSON', async () => {
    const unknown = await uploadFirmware(a, { model: 'NOPE', version: '2.0.0' });
    expect([unknown.status, unknown.body.code]).toEqual([422, 'unknown_model']);
    // Another account's model is unknown too.
    const foreign = await uploadFirmware(b, { model: 'LX-300', version: '2.0.0' });
    expect([foreign.status, foreign.body.code]).toEqual([422, 'unknown_model']);
    const invalid = await uploadFirmware(a, { model: 'LX-200', version: '1.x' });
    expect([invalid.status, invalid.body.code]).toEqual([422, 'invalid_version']);
    const form = new FormData();
    form.append('model', 'LX-200');
    form.append('version', '3.0.0');
    const noFile = await a.api.request('POST', '/api/v1/firmware/versions', { rawBody: form });
    expect([noFile.status, noFile.body.code]).toEqual([422, 'validation_failed']);
    const json = await a.api.post('/api/v1/firmware/versions', { model: 'LX-200', version: '3.0.0' });
    expect(json.status).toBe(415);
  });

  it('refuses a binary past MAX_FIRMWARE_BYTES with 413 and leaves no file behind', async () => {
    const before = readdirSync(path.join(server.config.dataDir, 'firmware')).length;
    const res = await uploadFirmware(a, { model: 'LX-200', version: '9.9.9', bytes: randomBytes(64 * 1024 + 1) });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
    expect(readdirSync(path.join(server.config.dataDir, 'firmware')).length).toBe(before);
    const list = await a.api.get('/api/v1/firmware/versions?model=LX-200');
    expect(list.body.versions.map((v: { version: string }) => v.version)).not.toContain('9.9.9');
    // Exactly the limit is accepted.
    await uploadFirmware(a, { model: 'LX-200', version: '9.9.8', bytes: randomBytes(64 * 1024), expectStatus: 201 });
  });

  it('lists newest version first by version order (1.10.0 above 1.9.2, rc below its release), filtered by model', async () => {
    for (const v of ['1.9.2', '1.10.0', '2.0.0-rc.1', '2.0.0', '1.4.2.7'])
      await uploadFirmware(a, { model: 'LX-200', version: v, expectStatus: 201 });
    const list = await a.api.get('/api/v1/firmware/versions?model=LX-200');
    expect(list.status).toBe(200);
    expect(list.body.versions.map((v: { version: string }) => v.version)).toEqual([
      '9.9.8',
      '2.0.0',
      '2.0.0-rc.1',
      '1.10.0',
      '1.9.2',
      '1.4.2.7',
      '1.4',
    ]);
    const other = await b.api.get('/api/v1/firmware/versions');
    expect(other.body.versions).toEqual([]);
  });

  it('viewer keys cannot upload or delete', async () => {
    const key = await a.api.post('/api/v1/api-keys', { name: 'ro', role: 'viewer' });
    const viewer = { ...a, api: a.api.withKey(key.body.secret) };
    const res = await uploadFirmware(viewer, { model: 'LX-200', version: '5.0.0' });
    expect(res.status).toBe(403);
    const list = await viewer.api.get('/api/v1/firmware/versions');
    expect(list.status).toBe(200);
  });

  it('deletes the binary but keeps the record; another account gets 404', async () => {
    const up = await uploadFirmware(a, { model: 'LX-300', version: '7.0.0', expectStatus: 201 });
    const id = up.body.firmware_version.id as string;
    expect((await b.api.delete(`/api/v1/firmware/versions/${id}`)).status).toBe(404);
    expect((await b.api.get(`/api/v1/firmware/versions/${id}`)).status).toBe(404);
    const del = await a.api.delete(`/api/v1/firmware/versions/${id}`);
    expect(del.status).toBe(200);
    expect(del.body.firmware_version.file_available).toBe(false);
    expect(existsSync(path.join(server.config.dataDir, 'firmware', `${id}.bin`))).toBe(false);
    const again = await a.api.get(`/api/v1/firmware/versions/${id}`);
    expect(again.body.firmware_version).toMatchObject({ version: '7.0.0', file_available: false });
    expect((await a.api.delete('/api/v1/firmware/versions/not-a-uuid')).status).toBe(404);
  });
});
