import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, serials } from '../helpers/factories';
import { newSigningKey, signFirmware, uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { gql } from './graphql-client';

const ATTACH = `mutation($id: ID!, $input: AttachFirmwareSignatureInput!) {
  attachFirmwareSignature(id: $id, input: $input) { id version signed signingKeyId signature fileAvailable }
}`;
const DEPLOY = `mutation($input: DeployFirmwareInput!) { deployFirmware(input: $input) { id kind targetVersion targetCount } }`;

/**
 * attachFirmwareSignature, and the firmware_unsigned error deployFirmware answers for a version
 * uploaded before the account's signing key: the same codes as REST (extensions.code).
 */
describe('GraphQL: signing a version uploaded before the key', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let url: string;
  const key = newSigningKey();

  beforeAll(async () => {
    server = await startTestServer();
    url = server.service.httpUrl;
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await claimDevices(a, { serials: serials('GS', 2), model: 'LX-200' });
  }, 60_000);
  afterAll(() => ifStarted(server)?.close());

  it('deployFirmware answers firmware_unsigned until attachFirmwareSignature signed the version', async () => {
    const uploaded = await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', expectStatus: 201 });
    const id: string = uploaded.body.firmware_version.id;
    const signature = signFirmware(key.privateKey, uploaded.bytes);
    const registered = await gql(
      url,
      'mutation($input: RegisterFirmwareSigningKeyInput!) { registerFirmwareSigningKey(input: $input) { current { keyId } } }',
      { apiKey: a.apiKey, variables: { input: { publicKey: key.publicPem } } },
    );
    expect(registered.body.data.registerFirmwareSigningKey.current.keyId).toBe(key.keyId);

    const deployInput = { input: { firmwareVersion: '1.0.0', filter: { model: 'LX-200' } } };
    const refused = await gql(url, DEPLOY, { apiKey: a.apiKey, variables: deployInput });
    expect(refused.body.data).toBeNull();
    expect(refused.body.errors[0].extensions).toMatchObject({
      code: 'firmware_unsigned',
      status: 422,
      versions: ['1.0.0'],
      firmware_version_ids: [id],
      key_id: key.keyId,
    });
    expect(refused.body.errors[0].message).toMatch(/attachFirmwareSignature/);

    const bad = await gql(url, ATTACH, {
      apiKey: a.apiKey,
      variables: { id, input: { signature: signFirmware(key.privateKey, Buffer.from('another image')) } },
    });
    expect(bad.body.errors[0].extensions).toMatchObject({ code: 'signature_invalid', status: 422 });
    const foreign = await gql(url, ATTACH, { apiKey: b.apiKey, variables: { id, input: { signature } } });
    expect(foreign.body.errors[0].extensions.code).toBe('not_found');

    const signed = await gql(url, ATTACH, { apiKey: a.apiKey, variables: { id, input: { signature } } });
    expect(signed.body.errors).toBeUndefined();
    expect(signed.body.data.attachFirmwareSignature).toEqual({
      id,
      version: '1.0.0',
      signed: true,
      signingKeyId: key.keyId,
      signature,
      fileAvailable: true,
    });
    const deployed = await gql(url, DEPLOY, { apiKey: a.apiKey, variables: deployInput });
    expect(deployed.body.errors).toBeUndefined();
    expect(deployed.body.data.deployFirmware).toMatchObject({ kind: 'deploy', targetVersion: '1.0.0', targetCount: 2 });
  });
});
