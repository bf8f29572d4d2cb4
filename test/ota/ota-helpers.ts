import { expect } from 'vitest';
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import type { MqttClient } from 'mqtt';
import type { TestAccount } from '../helpers/test-server';
import { collect, connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';

/** Uploads a firmware binary through the multipart API; returns the record and the bytes. */
export async function uploadFirmware(
  account: TestAccount,
  input: {
    model: string;
    version: string;
    bytes?: Buffer;
    releaseNotes?: string;
    expectStatus?: number;
    /** The `signature` form field (base64), or a key to sign the bytes with. */
    signature?: string | KeyObject;
    /** Put the signature after the file part (multipart fields may come in any order). */
    signatureAfterFile?: boolean;
    /** The `upgrade_from` form field (docs/ota.md "Upgrade paths"). */
    upgradeFrom?: string;
  },
  // Test bodies are asserted field by field.
): Promise<{ status: number; body: any; bytes: Buffer }> {
  const bytes = input.bytes ?? randomBytes(4096);
  const form = new FormData();
  form.append('model', input.model);
  form.append('version', input.version);
  form.append('release_notes', input.releaseNotes ?? `Release ${input.version}`);
  form.append('changelog', `- changes in ${input.version}`);
  if (input.upgradeFrom !== undefined) form.append('upgrade_from', input.upgradeFrom);
  const signature = typeof input.signature === 'object' ? signFirmware(input.signature, bytes) : input.signature;
  if (signature !== undefined && !input.signatureAfterFile) form.append('signature', signature);
  form.append('file', new Blob([new Uint8Array(bytes)]), `fw-${input.version}.bin`);
  if (signature !== undefined && input.signatureAfterFile) form.append('signature', signature);
  const res = await account.api.request('POST', '/api/v1/firmware/versions', { rawBody: form });
  if (input.expectStatus !== undefined) expect(res.status, JSON.stringify(res.body)).toBe(input.expectStatus);
  return { status: res.status, body: res.body, bytes };
}

export const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A manufacturer's Ed25519 signing key: the private half stays here, `publicPem` is what the service gets. */
export function newSigningKey(): { privateKey: KeyObject; publicKey: KeyObject; publicPem: string; keyId: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return {
    privateKey,
    publicKey,
    publicPem: String(publicKey.export({ type: 'spki', format: 'pem' })),
    keyId: createHash('sha256').update(der).digest('hex').slice(0, 16),
  };
}

/** base64 Ed25519 signature over the raw 32-byte SHA-256 digest of the image, as `openssl pkeyutl -sign -rawin` makes it. */
export const signFirmware = (privateKey: KeyObject, bytes: Buffer): string =>
  sign(null, createHash('sha256').update(bytes).digest(), privateKey).toString('base64');

import type { TestServer } from '../helpers/test-server';
import { SimulatedDevice, type SimulatedDeviceOptions } from '#simulator/simulated-device';
import { scaledReconnectPolicy } from '#simulator/reconnect-backoff';

/** Claims devices through the API and returns their MQTT credentials. */
export async function claimWithCredentials(
  account: TestAccount,
  input: { serials: string[]; model: string; firmware?: string },
): Promise<Array<{ serial: string; username: string; password: string }>> {
  const res = await account.api.post('/api/v1/devices/claim', input);
  expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(201);
  return (res.body.devices as Array<{ serial: string; credentials: { username: string; password: string } }>).map(
    (d) => ({ serial: d.serial, ...d.credentials }),
  );
}

/** Simulated lighting modules (the simulator's engine, in-process), started and connected. */
export async function startSimulated(
  server: TestServer,
  creds: Array<{ serial: string; username: string; password: string }>,
  options: Partial<Omit<SimulatedDeviceOptions, 'credentials' | 'brokerUrl'>> & { firmware: string },
): Promise<SimulatedDevice[]> {
  const devices = creds.map(
    (c) =>
      new SimulatedDevice({
        heartbeatS: 2,
        rebootMs: 100,
        // The documented waits, a quarter as long: a restarted test service is back in a second.
        reconnect: scaledReconnectPolicy(0.25),
        ...options,
        credentials: c,
        brokerUrl: server.service.mqttUrl!,
      }),
  );
  await Promise.all(devices.map((d) => d.start()));
  return devices;
}

// Test bodies are asserted field by field.
export async function deployment(account: TestAccount, id: string): Promise<any> {
  const res = await account.api.get(`/api/v1/firmware/deployments/${id}`);
  expect(res.status).toBe(200);
  return res.body.deployment;
}

/** Polls outside a test body (beforeAll), where expect.poll is not available. */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A device connected by hand (mqtt.js), subscribed to its commands and heard running 1.0.0 (its
 * heartbeat stored): the client, kept in `clients` for the test's teardown, and the commands it
 * has received so far.
 */
export async function connectHeard(
  mqttUrl: string,
  account: TestAccount,
  credentials: { serial: string; username: string; password: string },
  clients: MqttClient[],
): Promise<{ client: MqttClient; commands: () => Array<{ job_id: string }> }> {
  const { serial } = credentials;
  const client = await connectDevice(mqttUrl, credentials);
  clients.push(client);
  const seen = collect(client);
  await client.subscribeAsync(topics.ota(serial), { qos: 1 });
  await client.publishAsync(topics.heartbeat(serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
  await expect
    .poll(async () => (await account.api.get(`/api/v1/devices/${serial}`)).body.firmware, {
      timeout: 30_000,
      interval: 50,
    })
    .toBe('1.0.0');
  const commands = () =>
    seen.filter((m) => m.topic === topics.ota(serial)).map((m) => JSON.parse(m.payload) as { job_id: string });
  return { client, commands };
}
