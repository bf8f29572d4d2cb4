import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { createHash, createPublicKey, verify } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { collect, connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { claimWithCredentials, newSigningKey, startSimulated, uploadFirmware } from './ota-helpers';
import type { SimulatedDevice } from '#simulator/simulated-device';
import { ifStarted } from '../helpers/teardown';

type Creds = { serial: string; username: string; password: string };
type Command = {
  job_id: string;
  version: string;
  url: string;
  sha256: string;
  size: number;
  signature?: string;
  key_id?: string;
};

/**
 * Signed firmware on the device side: OTA commands of signed versions carry the signature and
 * the key id, on every path a command takes (first dispatch, re-send on subscribe, re-send by
 * the sweep), and they verify with node:crypto the way docs/device-protocol.md tells a device
 * to; a version signed with a key that was since rotated keeps that key. Simulated modules that
 * trust a key install what it signed and refuse the rest with `signature_invalid`. Unsigned
 * commands come from an account without a key (`u`): an account with one refuses to deploy an
 * unsigned version (422 firmware_unsigned, test/services/firmware-signatures.test.ts).
 */
describe('signed firmware in OTA commands', { timeout: 120_000 }, () => {
  let server: TestServer;
  let a: TestAccount;
  /** An account without a signing key: its versions go unsigned. */
  let u: TestAccount;
  const clients: MqttClient[] = [];
  const simulated: SimulatedDevice[] = [];
  const key1 = newSigningKey();
  const key2 = newSigningKey();
  const images = {
    '1.0.0': Buffer.alloc(3000, 'one'),
    '2.0.0': Buffer.alloc(3000, 'two'),
    '3.0.0': Buffer.alloc(3000, 'three'),
    '4.0.0': Buffer.alloc(3000, 'four'),
  };
  const poll = { timeout: 45_000, interval: 100 };

  beforeAll(async () => {
    // No delta images: the commands compared here are the full image's (deltas: ota-deltas.test.ts).
    server = await startTestServer({
      env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '1', DELTA_MAX_IMAGE_BYTES: '0' },
    });
    a = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    await buildModel(a, 'LX-200');
    u = await server.createAccount();
    await buildModel(u, 'LX-200');
    await uploadFirmware(u, { model: 'LX-200', version: '1.0.0', bytes: images['1.0.0'], expectStatus: 201 });
    const putKey = async (publicPem: string) =>
      expect(
        (await a.api.request('PUT', '/api/v1/firmware/signing-key', { body: { public_key: publicPem } })).status,
      ).toBe(200);
    // 1.0.0 before any key (unsigned), 2.0.0 signed with key 1, then the key rotates, 3.0.0 and 4.0.0 with key 2.
    await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', bytes: images['1.0.0'], expectStatus: 201 });
    await putKey(key1.publicPem);
    await uploadFirmware(a, {
      model: 'LX-200',
      version: '2.0.0',
      bytes: images['2.0.0'],
      signature: key1.privateKey,
      expectStatus: 201,
    });
    await putKey(key2.publicPem);
    await uploadFirmware(a, {
      model: 'LX-200',
      version: '3.0.0',
      bytes: images['3.0.0'],
      signature: key2.privateKey,
      expectStatus: 201,
    });
    await uploadFirmware(a, {
      model: 'LX-200',
      version: '4.0.0',
      bytes: images['4.0.0'],
      signature: key2.privateKey,
      expectStatus: 201,
    });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await Promise.all(simulated.map((d) => d.stop()));
    await ifStarted(server)?.close();
  });

  const ota = () => server.service.services.ota;
  const connect = async (c: Creds, firmware: string, subscribe = true, account = a) => {
    const client = await connectDevice(server.service.mqttUrl!, c);
    clients.push(client);
    const seen = collect(client);
    if (subscribe) await client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
    await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware }), { qos: 1 });
    await expect
      .poll(async () => (await account.api.get(`/api/v1/devices/${c.serial}`)).body.firmware, poll)
      .toBe(firmware);
    const commands = () =>
      seen.filter((m) => m.topic === topics.ota(c.serial)).map((m) => JSON.parse(m.payload) as Command);
    return { client, commands };
  };
  const deploy = async (version: string, serials: string[], account = a) => {
    const res = await account.api.post('/api/v1/firmware/deploy', { firmware_version: version, serials });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    await ota().idle();
    return res.body.deployment_id as string;
  };
  const updateOf = async (deploymentId: string, serial: string, account = a) =>
    (await account.api.get(`/api/v1/firmware/deployments/${deploymentId}/devices?limit=1000`)).body.devices.find(
      (d: { serial: string }) => d.serial === serial,
    );
  /** What a device does: hash the downloaded image, then check the signature over those 32 bytes with the key it trusts. */
  const verifiesWith = async (command: Command, publicPem: string) => {
    const image = Buffer.from(await (await fetch(command.url)).arrayBuffer());
    const digest = createHash('sha256').update(image).digest();
    expect(digest.toString('hex')).toBe(command.sha256);
    return verify(null, digest, createPublicKey(publicPem), Buffer.from(command.signature!, 'base64'));
  };

  it('a command of a version signed with a since-rotated key carries that key id and its signature, which verify over the downloaded image; the sweep re-sends it signed', async () => {
    const [c] = (await claimWithCredentials(a, { serials: ['SIG-1'], model: 'LX-200' })) as [Creds];
    const dev = await connect(c, '1.0.0');
    await deploy('2.0.0', ['SIG-1']);
    await expect.poll(() => dev.commands().length, poll).toBe(1);
    const command = dev.commands()[0]!;
    expect(command).toMatchObject({
      version: '2.0.0',
      key_id: key1.keyId,
      signature: expect.stringMatching(/^[A-Za-z0-9+/]{86}==$/),
    });
    // The key comes from what the service shows (the retired key), as an operator would take it.
    const keys = (await a.api.get('/api/v1/firmware/signing-key')).body;
    expect(keys.signing_key.key_id).toBe(key2.keyId);
    const retired = keys.retired_keys.find((k: { key_id: string }) => k.key_id === command.key_id);
    expect(await verifiesWith(command, retired.public_key)).toBe(true);
    expect(await verifiesWith(command, key2.publicPem)).toBe(false);
    // Unanswered: the sweep publishes the same job again, still signed.
    await new Promise((r) => setTimeout(r, 1100));
    await ota().runNow();
    await expect.poll(() => dev.commands().length, poll).toBe(2);
    expect(dev.commands()[1]).toEqual({ ...command, url: expect.any(String) });
  });

  it('the re-send to a device that subscribed late is signed with the current key; an unsigned version has neither field', async () => {
    const creds = [
      ...(await claimWithCredentials(a, { serials: ['SIG-2'], model: 'LX-200' })),
      ...(await claimWithCredentials(u, { serials: ['SIG-3'], model: 'LX-200' })),
    ] as Creds[];
    const late = await connect(creds[0]!, '1.0.0', false);
    const id = await deploy('3.0.0', ['SIG-2']);
    await expect.poll(async () => (await updateOf(id, 'SIG-2')).state, poll).toBe('sent');
    await late.client.subscribeAsync(topics.ota('SIG-2'), { qos: 1 });
    await expect.poll(() => late.commands().length, poll).toBe(1);
    expect(late.commands()[0]).toMatchObject({ version: '3.0.0', key_id: key2.keyId });
    expect(await verifiesWith(late.commands()[0]!, key2.publicPem)).toBe(true);

    const old = await connect(creds[1]!, '0.5.0', true, u);
    await deploy('1.0.0', ['SIG-3'], u);
    await expect.poll(() => old.commands().length, poll).toBe(1);
    expect(Object.keys(old.commands()[0]!).sort()).toEqual(['job_id', 'model', 'sha256', 'size', 'url', 'version']);
  });

  it('a simulated module trusting a key installs what it signed and reports signature_invalid for an image signed with another key, a tampered one and an unsigned one', async () => {
    const creds = [
      ...(await claimWithCredentials(a, { serials: ['SIM-GOOD', 'SIM-OLDKEY', 'SIM-TAMPER'], model: 'LX-200' })),
      ...(await claimWithCredentials(u, { serials: ['SIM-UNSIGNED'], model: 'LX-200' })),
    ] as Creds[];
    const [good, oldKey, tamper, unsigned] = creds as [Creds, Creds, Creds, Creds];
    simulated.push(
      ...(await startSimulated(server, [good, oldKey, tamper], { firmware: '1.0.0', signingKey: key2.publicKey })),
    );
    simulated.push(...(await startSimulated(server, [unsigned], { firmware: '0.5.0', signingKey: key2.publicKey })));
    // Someone with write access to the firmware folder swaps 4.0.0's image (and its recorded
    // digest): only the signature can tell.
    const v4 = (await a.api.get('/api/v1/firmware/versions?model=LX-200')).body.versions.find(
      (v: { version: string }) => v.version === '4.0.0',
    );
    const forged = Buffer.alloc(3000, 'evil');
    writeFileSync(path.join(server.config.dataDir, 'firmware', `${v4.id}.bin`), forged);
    await server.service.database
      .knex('firmware_versions')
      .where({ id: v4.id })
      .update({ sha256: createHash('sha256').update(forged).digest('hex') });

    const deployments = {
      good: await deploy('3.0.0', ['SIM-GOOD']),
      oldKey: await deploy('2.0.0', ['SIM-OLDKEY']),
      tamper: await deploy('4.0.0', ['SIM-TAMPER']),
      unsigned: await deploy('1.0.0', ['SIM-UNSIGNED'], u),
    };
    await expect.poll(async () => (await updateOf(deployments.good, 'SIM-GOOD')).state, poll).toBe('succeeded');
    expect((await a.api.get('/api/v1/devices/SIM-GOOD')).body.firmware).toBe('3.0.0');
    const failures = {
      oldKey: /^signature_invalid: signed with key [0-9a-f]{16}, this device trusts key [0-9a-f]{16}/,
      tamper: /^signature_invalid: the signature does not verify/,
      unsigned: /^signature_invalid: the command carries no signature/,
    };
    const serialOf = { oldKey: 'SIM-OLDKEY', tamper: 'SIM-TAMPER', unsigned: 'SIM-UNSIGNED' } as const;
    for (const [name, pattern] of Object.entries(failures) as Array<[keyof typeof failures, RegExp]>) {
      const account = name === 'unsigned' ? u : a;
      await expect
        .poll(async () => (await updateOf(deployments[name], serialOf[name], account)).state, poll)
        .toBe('failed');
      expect((await updateOf(deployments[name], serialOf[name], account)).error, name).toMatch(pattern);
    }
    expect((await a.api.get('/api/v1/devices/SIM-OLDKEY')).body.firmware).toBe('1.0.0');
    expect((await a.api.get('/api/v1/devices/SIM-TAMPER')).body.firmware).toBe('1.0.0');
    expect(readFileSync(path.join(server.config.dataDir, 'firmware', `${v4.id}.bin`))).toEqual(forged);
  });
});
