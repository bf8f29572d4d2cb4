import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { gql } from '../graphql/graphql-client';

const UPDATE = `mutation($id: ID!, $input: UpdateFirmwareVersionInput!) {
  updateFirmwareVersion(id: $id, input: $input) { id version upgradeFrom }
}`;

/** `upgrade_from` on firmware versions through REST (upload form, PATCH) and GraphQL (docs/ota.md "Upgrade paths"). */
describe('upgrade_from of a firmware version', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'UF-1');
  }, 60_000);
  afterAll(() => ifStarted(server)?.close());

  it('is set at upload, shown in the views, changed with PATCH and GraphQL; a bad range is a clear 422', async () => {
    const up = await uploadFirmware(a, {
      model: 'UF-1',
      version: '2.0.0',
      upgradeFrom: ' >=1.5.0 <3 ',
      expectStatus: 201,
    });
    const id = up.body.firmware_version.id as string;
    expect(up.body.firmware_version.upgrade_from).toBe('>=1.5.0 <3');
    const plain = await uploadFirmware(a, { model: 'UF-1', version: '1.0.0', expectStatus: 201 });
    expect(plain.body.firmware_version.upgrade_from).toBeNull();

    const bad = await uploadFirmware(a, { model: 'UF-1', version: '2.1.0', upgradeFrom: '>=1.2.3.4.5' });
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe('validation_failed');
    expect(JSON.stringify(bad.body.errors)).toContain('upgrade_from');
    expect(JSON.stringify(bad.body.errors)).toContain('is not a version range');
    // Nothing was stored.
    const list = (await a.api.get('/api/v1/firmware/versions?model=UF-1')).body.versions;
    expect(list.map((v: { version: string }) => v.version).sort()).toEqual(['1.0.0', '2.0.0']);

    const patched = await a.api.request('PATCH', `/api/v1/firmware/versions/${id}`, {
      body: { upgrade_from: '^1.4 || 1.2.x' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.firmware_version.upgrade_from).toBe('^1.4 || 1.2.x');
    expect((await a.api.get(`/api/v1/firmware/versions/${id}`)).body.firmware_version.upgrade_from).toBe(
      '^1.4 || 1.2.x',
    );
    const refused = await a.api.request('PATCH', `/api/v1/firmware/versions/${id}`, {
      body: { upgrade_from: 'latest' },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe('validation_failed');
    const unknownField = await a.api.request('PATCH', `/api/v1/firmware/versions/${id}`, { body: { version: '9.9' } });
    expect(unknownField.status).toBe(422);
    // Another account's version is not found, and unchanged.
    const foreign = await b.api.request('PATCH', `/api/v1/firmware/versions/${id}`, { body: { upgrade_from: null } });
    expect(foreign.status).toBe(404);

    const url = server.service.httpUrl;
    const cleared = await gql(url, UPDATE, { apiKey: a.apiKey, variables: { id, input: { upgradeFrom: '*' } } });
    expect(cleared.body.data.updateFirmwareVersion).toMatchObject({ version: '2.0.0', upgradeFrom: null });
    const wrong = await gql(url, UPDATE, { apiKey: a.apiKey, variables: { id, input: { upgradeFrom: '>=' } } });
    expect(wrong.body.errors[0].extensions.code).toBe('validation_failed');
    const set = await gql(url, UPDATE, { apiKey: a.apiKey, variables: { id, input: { upgradeFrom: '1.5.x' } } });
    expect(set.body.data.updateFirmwareVersion.upgradeFrom).toBe('1.5.x');
    const listed = await gql(url, '{ firmwareVersions(model: "UF-1") { version upgradeFrom } }', { apiKey: a.apiKey });
    expect(listed.body.data.firmwareVersions).toEqual([
      { version: '2.0.0', upgradeFrom: '1.5.x' },
      { version: '1.0.0', upgradeFrom: null },
    ]);
    const foreignGql = await gql(url, UPDATE, { apiKey: b.apiKey, variables: { id, input: { upgradeFrom: null } } });
    expect(foreignGql.body.errors[0].extensions.code).toBe('not_found');
  });
});
