import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { DomainError } from '#core/shared/errors';
import { versionKey } from '#core/shared/version';
import type { FirmwareVersion } from '#core/firmware/firmware.service';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { serials, setReported } from '../helpers/factories';
import { newSigningKey, sha256, signFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';

/**
 * Signing a version uploaded before the account registered its signing key, and the rule that,
 * once a key is registered, nothing unsigned is sent to devices: deploys and their dry runs,
 * rollbacks, retries and claim-time firmware are refused with 422 firmware_unsigned before
 * anything is recorded (docs/signed-firmware.md "Sign a version uploaded before the key").
 * How REST and GraphQL present these: test/integration/firmware-signature-attach.test.ts and
 * test/graphql/firmware-signature.test.ts.
 */
describe('firmware signatures attached later, and no unsigned firmware sent once a key is registered', () => {
  let harness: ServiceHarness;
  let a: HarnessAccount;
  let b: HarnessAccount;
  const key1 = newSigningKey();
  const key2 = newSigningKey();
  const bytes = new Map<string, Buffer>();
  const ids = new Map<string, string>();
  /** A deployment of the unsigned 1.0.7 recorded before the key was registered (its updates failed). */
  let oldDeploymentId: string;
  const knex = () => harness.database.knex;

  const upload = async (acc: HarnessAccount, version: string, signWith?: typeof key1): Promise<FirmwareVersion> => {
    const data = randomBytes(2048);
    const file = await harness.services.firmware.receiveFile(acc.admin, Readable.from([data]));
    const created = await harness.services.firmware.create(acc.admin, {
      fields: {
        model: 'LX-200',
        version,
        ...(signWith ? { signature: signFirmware(signWith.privateKey, data) } : {}),
      },
      file,
    });
    if (acc === a) {
      bytes.set(version, data);
      ids.set(version, created.id);
    }
    return created;
  };
  const sign = (version: string, key = key1) => signFirmware(key.privateKey, bytes.get(version)!);
  const attach = (acc: HarnessAccount, version: string, signature: string) =>
    harness.services.firmware.attachSignature(acc.admin, { id: ids.get(version)!, signature });
  const read = (version: string) => harness.services.firmware.get(a.admin, { id: ids.get(version)! });
  /** The DomainError a call was refused with. */
  const refusal = async (work: Promise<unknown>): Promise<DomainError> => {
    const error = await work.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    return error as DomainError;
  };
  const deploymentCount = async (acc: HarnessAccount) =>
    Number(
      ((await knex()('deployments').where({ account_id: acc.accountId }).count('* as n').first()) as { n: string }).n,
    );
  /** What devices would have reported: the deployment's updates ended `state`, from their version. */
  const finishUpdates = async (deploymentId: string, state: 'succeeded' | 'failed') => {
    const rows: Array<{ device_id: string; target_version: string }> = await knex()('device_updates')
      .where({ deployment_id: deploymentId })
      .select('device_id', 'target_version');
    await knex()('device_updates')
      .where({ deployment_id: deploymentId })
      .update({ state, finished_at: new Date(), deadline_at: null });
    if (state === 'succeeded') {
      await knex()('devices')
        .whereIn(
          'id',
          rows.map((r) => r.device_id),
        )
        .update({ firmware: rows[0]!.target_version, firmware_key: versionKey(rows[0]!.target_version) });
    }
  };

  beforeAll(async () => {
    harness = await startServiceHarness();
    a = await harness.createAccount();
    b = await harness.createAccount();
    for (const acc of [a, b]) await harness.services.models.register(acc.admin, { name: 'LX-200', description: '' });
    // Before the key: unsigned uploads, as they always were.
    for (const v of ['0.9.0', '1.0.0', '1.0.5', '1.0.6', '1.0.7']) await upload(a, v);
    await upload(b, '1.0.0');
    await harness.services.claims.claim(a.admin, { serials: serials('SG', 6), model: 'LX-200' });
    await harness.services.claims.claim(b.admin, { serials: serials('SB', 2), model: 'LX-200' });
    await setReported(knex(), { accountId: a.accountId, serials: serials('SG', 6), state: { firmware: '1.0.0' } });
    await setReported(knex(), { accountId: b.accountId, serials: serials('SB', 2), state: { firmware: '0.1.0' } });
    // A deployment of 1.0.7 made before the key existed, whose updates failed.
    const old = await harness.services.deployments.deploy(a.admin, {
      firmwareVersion: '1.0.7',
      serials: ['SG-0005', 'SG-0006'],
    });
    oldDeploymentId = old.id;
    await finishUpdates(oldDeploymentId, 'failed');
    // 0.9.0's binary is deleted: only its record and digest stay.
    await harness.services.firmware.deleteFile(a.admin, { id: ids.get('0.9.0')! });
    await harness.services.signingKeys.register(a.admin, { publicKey: key1.publicPem });
    await upload(a, '1.1.0', key1);
  }, 60_000);
  afterAll(async () => ifStarted(harness)?.close());

  it('refuses a signature that is missing, malformed, by another key or over another image (422 signature_invalid) and changes nothing', async () => {
    const cases: Array<[string, string]> = [
      ['blank', '  '],
      ['not base64', 'not a signature!'],
      ['too short', Buffer.alloc(32).toString('base64')],
      ['by another key', sign('1.0.0', key2)],
      ['over another image', sign('1.0.5')],
    ];
    for (const [name, signature] of cases) {
      const error = await refusal(attach(a, '1.0.0', signature));
      expect([error.code, name]).toEqual(['signature_invalid', name]);
      expect(error.errors?.[0]?.field).toBe('signature');
    }
    expect(await read('1.0.0')).toMatchObject({ signed: false, signature: null, signingKeyId: null });
  });

  it("attaches a signature that verifies with the account's key over the stored digest; sending it again changes nothing", async () => {
    const signed = await attach(a, '1.0.6', sign('1.0.6'));
    expect(signed).toMatchObject({
      id: ids.get('1.0.6'),
      version: '1.0.6',
      sha256: sha256(bytes.get('1.0.6')!),
      signed: true,
      signingKeyId: key1.keyId,
      signature: sign('1.0.6'),
      fileAvailable: true,
    });
    expect(await read('1.0.6')).toEqual(signed);
    // PUT semantics: the same signature again answers the same version.
    expect(await attach(a, '1.0.6', sign('1.0.6'))).toEqual(signed);
  });

  it('signs a version whose binary was deleted: the stored digest is what the signature covers', async () => {
    const before = await read('0.9.0');
    expect(before).toMatchObject({ fileAvailable: false, signed: false });
    const signed = await attach(a, '0.9.0', sign('0.9.0'));
    expect(signed).toMatchObject({
      fileAvailable: false,
      signed: true,
      signingKeyId: key1.keyId,
      sha256: before.sha256,
    });
  });

  it("answers not_found for another account's version, an unknown id and a malformed one; viewers are forbidden", async () => {
    for (const id of [ids.get('1.0.0')!, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const error = await refusal(harness.services.firmware.attachSignature(b.admin, { id, signature: sign('1.0.0') }));
      expect(error.code).toBe('not_found');
    }
    const viewer = { ...a.admin, role: 'viewer' as const };
    expect(
      (
        await refusal(
          harness.services.firmware.attachSignature(viewer, { id: ids.get('1.0.0')!, signature: sign('1.0.0') }),
        )
      ).code,
    ).toBe('forbidden');
    expect(await read('1.0.0')).toMatchObject({ signed: false });
  });

  it('without a registered key there is nothing to verify against: 422 signature_invalid', async () => {
    const version = (await harness.services.firmware.list(b.admin))[0]!;
    const error = await refusal(
      harness.services.firmware.attachSignature(b.admin, { id: version.id, signature: sign('1.0.0') }),
    );
    expect(error.code).toBe('signature_invalid');
    expect(error.message).toMatch(/No firmware signing key is registered/);
    expect((await harness.services.firmware.list(b.admin))[0]).toMatchObject({ signed: false });
  });

  it('refuses a deploy and its dry run of an unsigned version with 422 firmware_unsigned, recording nothing; signed, it goes', async () => {
    const before = await deploymentCount(a);
    const input = { firmwareVersion: '1.0.5', serials: ['SG-0001'] };
    // One call at a time: a second promise made up front rejects while the first is awaited,
    // unhandled for that moment (PostgreSQL ran both at once and vitest failed the run on it).
    for (const work of [
      () => harness.services.deployments.deploy(a.admin, input),
      () => harness.services.deployments.preview(a.admin, input),
    ]) {
      const error = await refusal(work());
      expect(error.code).toBe('firmware_unsigned');
      expect(error.details).toMatchObject({
        versions: ['1.0.5'],
        firmware_version_ids: [ids.get('1.0.5')],
        key_id: key1.keyId,
      });
      expect(error.message).toMatch(/1\.0\.5 is not signed/);
      expect(error.message).toMatch(/signature/);
    }
    expect(await deploymentCount(a)).toBe(before);
    expect(await knex()('device_updates').where({ account_id: a.accountId, state: 'queued' })).toEqual([]);
    await attach(a, '1.0.5', sign('1.0.5'));
    const deployed = await harness.services.deployments.deploy(a.admin, input);
    expect(deployed).toMatchObject({ kind: 'deploy', targetVersion: '1.0.5', targetCount: 1 });
    await harness.services.deployments.cancel(a.admin, { id: deployed.id });
  });

  it('refuses a retry of a deployment recorded before the key, of a version still unsigned (422 firmware_unsigned); once signed, the retry goes', async () => {
    const before = await deploymentCount(a);
    const error = await refusal(harness.services.deployments.retryFailed(a.admin, { id: oldDeploymentId }));
    expect(error.code).toBe('firmware_unsigned');
    expect(error.details).toMatchObject({ versions: ['1.0.7'], firmware_version_ids: [ids.get('1.0.7')] });
    expect(await deploymentCount(a)).toBe(before);
    await attach(a, '1.0.7', sign('1.0.7'));
    const retried = await harness.services.deployments.retryFailed(a.admin, { id: oldDeploymentId });
    expect(retried).toMatchObject({ kind: 'retry', targetVersion: '1.0.7', targetCount: 2 });
    await harness.services.deployments.cancel(a.admin, { id: retried.id });
  });

  it('refuses a rollback to an unsigned previous version with 422 firmware_unsigned before anything is recorded; once signed, the rollback goes', async () => {
    const deployed = await harness.services.deployments.deploy(a.admin, {
      firmwareVersion: '1.1.0',
      serials: ['SG-0001', 'SG-0002', 'SG-0003'],
    });
    await finishUpdates(deployed.id, 'succeeded');
    const before = await deploymentCount(a);
    const error = await refusal(harness.services.deployments.rollback(a.admin, { id: deployed.id }));
    expect(error.code).toBe('firmware_unsigned');
    expect(error.details).toMatchObject({ versions: ['1.0.0'], firmware_version_ids: [ids.get('1.0.0')] });
    expect(error.message).toMatch(/Firmware 1\.0\.0 is not signed/);
    expect(await deploymentCount(a)).toBe(before);
    expect(await knex()('device_updates').where({ account_id: a.accountId, state: 'queued' })).toEqual([]);

    await attach(a, '1.0.0', sign('1.0.0'));
    const rollback = await harness.services.deployments.rollback(a.admin, { id: deployed.id });
    expect(rollback).toMatchObject({ kind: 'rollback', targetVersion: '1.0.0', targetCount: 3 });
    await harness.services.deployments.cancel(a.admin, { id: rollback.id });
  });

  it('refuses a claim whose firmware is unsigned (422 firmware_unsigned), claiming nothing', async () => {
    await upload(b, '1.0.1');
    await harness.services.signingKeys.register(b.admin, { publicKey: key2.publicPem });
    const provisioned = (await harness.services.allocation.get(b.admin)).provisioned;
    const error = await refusal(
      harness.services.claims.claim(b.admin, { serials: ['SB-0101'], model: 'LX-200', firmware: '1.0.1' }),
    );
    expect(error.code).toBe('firmware_unsigned');
    expect(error.details).toMatchObject({ versions: ['1.0.1'], key_id: key2.keyId });
    expect((await harness.services.allocation.get(b.admin)).provisioned).toBe(provisioned);
    expect(await knex()('devices').where({ serial: 'SB-0101' })).toEqual([]);
    // Without a firmware the claim goes as always.
    expect((await harness.services.claims.claim(b.admin, { serials: ['SB-0101'], model: 'LX-200' })).claimed).toBe(1);
  });

  it('an account without a signing key deploys unsigned versions as before', async () => {
    const c = await harness.createAccount();
    await harness.services.models.register(c.admin, { name: 'LX-200', description: '' });
    await upload(c, '2.0.0');
    await harness.services.claims.claim(c.admin, { serials: serials('SC', 1), model: 'LX-200' });
    const deployed = await harness.services.deployments.deploy(c.admin, {
      firmwareVersion: '2.0.0',
      serials: ['SC-0001'],
    });
    expect(deployed).toMatchObject({ targetVersion: '2.0.0', targetCount: 1 });
  });

  it('replaces a signature by a retired key only with one that verifies with the current key', async () => {
    // 1.1.0 was uploaded signed with key1; the account rotates to key2.
    await harness.services.signingKeys.register(a.admin, { publicKey: key2.publicPem });
    const old = await read('1.1.0');
    expect(old).toMatchObject({ signingKeyId: key1.keyId });
    // The stored signature again: nothing changes (it verified when it was stored).
    expect(await attach(a, '1.1.0', old.signature!)).toEqual(old);
    // Another key's, or one over another image: refused, the old one stays.
    for (const bad of [signFirmware(newSigningKey().privateKey, bytes.get('1.1.0')!), sign('1.0.0', key2)]) {
      expect((await refusal(attach(a, '1.1.0', bad))).code).toBe('signature_invalid');
    }
    expect(await read('1.1.0')).toEqual(old);
    const resigned = await attach(a, '1.1.0', sign('1.1.0', key2));
    expect(resigned).toMatchObject({ signed: true, signingKeyId: key2.keyId, signature: sign('1.1.0', key2) });
  });
});
