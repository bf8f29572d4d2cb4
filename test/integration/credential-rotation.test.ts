import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { Writable } from 'node:stream';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { Aedes } from 'aedes';
import { createLogger } from '#core/logger';
import { topics } from '#protocol/topics';
import { sessionStoreOf } from '#broker/aedes-internals';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, deviceOptions, refusalCode, type DeviceCreds } from '../helpers/mqtt';
import { makeCsr } from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

interface Received {
  topic: string;
  payload: string;
  qos: number;
  retain: boolean;
}

/** Connects, collecting every message from the first byte on (deliveries right after CONNACK included). */
function connectCollecting(
  url: string,
  creds: DeviceCreds,
  extra: Partial<IClientOptions> = {},
): Promise<{ client: MqttClient; seen: Received[]; sessionPresent: boolean }> {
  return new Promise((resolve, reject) => {
    const seen: Received[] = [];
    const client = mqtt.connect(url, deviceOptions(creds, extra));
    client.on('message', (topic, payload, packet) =>
      seen.push({ topic, payload: payload.toString(), qos: packet.qos, retain: packet.retain }),
    );
    client.once('connect', (connack) => resolve({ client, seen, sessionPresent: connack.sessionPresent }));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Planned credential rotation (docs/device-protocol.md "Credentials rotation") on the wire, with
 * real mqtt.js clients: the new password reaches the device over its authenticated session and
 * nowhere else (not the broker's session store, not a retained message, not the logs), the old
 * one keeps working until the device confirms, and the emergency rotation still revokes at once.
 * The rules themselves (grace, replacement, expiry) are in test/services/credential-rotation.test.ts.
 */
describe('in-band credential rotation over MQTT', () => {
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  /** Every line the service logged, at trace level. */
  const logged: string[] = [];
  /** Every secret the service handed out during this file. */
  const secrets: string[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged.push(chunk.toString());
        done();
      },
    });
    server = await startTestServer({ logger: createLogger('trace', sink) });
    account = await server.createAccount();
    url = server.service.mqttUrl!;
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const claim = async (serial: string) => (await claimForMqtt(server, account, [serial], { firmware: null }))[0]!;
  const rotate = (serial: string, body?: unknown) => account.api.post(`/api/v1/devices/${serial}/credentials`, body);
  const credentialMessages = (seen: Received[], serial: string) =>
    seen.filter((m) => m.topic === topics.credentials(serial));
  const delivered = (m: Received) => {
    const value = JSON.parse(m.payload) as { type: string; rotation_id: string; password: string; username: string };
    secrets.push(value.password);
    return value;
  };

  it('delivers the new password over the session; the old one works until the device acknowledges it, then gets CONNACK 4', async () => {
    const old = await claim('ROT-ACK');
    const first = await connectCollecting(url, old);
    await first.client.subscribeAsync(topics.credentials(old.serial), { qos: 1 });

    const res = await rotate(old.serial, { mode: 'in_band' });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ serial: old.serial, username: old.serial, mode: 'in_band' });
    expect(res.body.rotation).toMatchObject({ kind: 'password', state: 'pending' });
    expect(res.body).not.toHaveProperty('password');
    // Default grace: 7 days.
    const graceMs = Date.parse(res.body.rotation.grace_ends_at) - Date.parse(res.body.rotation.created_at);
    expect(graceMs).toBe(7 * 86_400_000);

    await expect.poll(() => credentialMessages(first.seen, old.serial).length).toBe(1);
    const message = credentialMessages(first.seen, old.serial)[0]!;
    expect(message).toMatchObject({ qos: 1, retain: false });
    const next = delivered(message);
    expect(next).toMatchObject({ type: 'password', rotation_id: res.body.rotation.id, username: old.serial });
    expect(next.password).not.toBe(old.password);
    // The planned path does not close the session.
    await sleep(200);
    expect(first.client.connected).toBe(true);
    await first.client.endAsync();

    // The old password still works, and the pending one is delivered again on that connection.
    const second = await connectCollecting(url, old);
    expect(second.sessionPresent).toBe(true);
    await expect.poll(() => credentialMessages(second.seen, old.serial).length).toBe(1);
    expect(JSON.parse(credentialMessages(second.seen, old.serial)[0]!.payload)).toMatchObject({
      rotation_id: next.rotation_id,
      password: next.password,
    });

    // The device confirms: from now on only the new password is accepted.
    await second.client.publishAsync(
      topics.credentialsAck(old.serial),
      JSON.stringify({ rotation_id: next.rotation_id }),
      {
        qos: 1,
      },
    );
    await second.client.endAsync();
    await expect.poll(() => refusalCode(url, old)).toBe(4);
    const fresh = await connectCollecting(url, { ...old, password: next.password });
    await sleep(300);
    expect(credentialMessages(fresh.seen, old.serial)).toEqual([]);
    await fresh.client.endAsync();

    const history = await account.api.get(`/api/v1/devices/${old.serial}/history`);
    const types = (history.body.events as Array<{ type: string; data: Record<string, unknown> }>).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['credentials_rotation_started', 'credentials_rotated']));
    const rotated = (history.body.events as Array<{ type: string; data: Record<string, unknown> }>).find(
      (e) => e.type === 'credentials_rotated',
    )!;
    expect(rotated.data).toMatchObject({ mode: 'in_band', kind: 'password', outcome: 'acknowledged' });
    const events = await server.service.database
      .knex('events')
      .where({ account_id: account.accountId, type: 'device.credentials_rotated', subject: old.serial })
      .select('data');
    expect(events).toHaveLength(1);
  });

  it('connecting with the new password confirms the rotation', async () => {
    const old = await claim('ROT-USE');
    const device = await connectCollecting(url, old);
    await device.client.subscribeAsync(topics.credentials(old.serial), { qos: 1 });
    expect((await rotate(old.serial, { mode: 'in_band', grace_s: 3600 })).status).toBe(202);
    await expect.poll(() => credentialMessages(device.seen, old.serial).length).toBe(1);
    const next = delivered(credentialMessages(device.seen, old.serial)[0]!);
    await device.client.endAsync();
    const fresh = await connectDevice(url, { ...old, password: next.password });
    await fresh.endAsync();
    await expect.poll(() => refusalCode(url, old)).toBe(4);
    expect(await refusalCode(url, { ...old, password: next.password })).toBe(0);
  });

  it('a device away during the rotation gets the secret only from the re-delivery on connect: nothing queued in its session, nothing retained', async () => {
    const old = await claim('ROT-AWAY');
    const first = await connectDevice(url, old);
    await first.subscribeAsync([topics.credentials(old.serial), topics.ota(old.serial), topics.config(old.serial)], {
      qos: 1,
    });
    await first.endAsync();

    const res = await rotate(old.serial, { mode: 'in_band' });
    expect(res.status).toBe(202);
    // The broker's session store (where Aedes queues QoS 1 messages for an offline clean=false
    // session) holds nothing of it for the device.
    const aedes = (server.service.broker as unknown as { aedes: Aedes }).aedes;
    const queued: string[] = [];
    for await (const packet of sessionStoreOf(aedes).outgoingStream({ id: old.serial })) queued.push(packet.topic);
    expect(queued.filter((topic) => topic === topics.credentials(old.serial))).toEqual([]);

    const back = await connectCollecting(url, old);
    expect(back.sessionPresent).toBe(true);
    await expect.poll(() => credentialMessages(back.seen, old.serial).length).toBe(1);
    await sleep(500);
    // Exactly one copy: the re-delivery, never a queued one besides it.
    const copies = credentialMessages(back.seen, old.serial);
    expect(copies).toHaveLength(1);
    expect(copies[0]).toMatchObject({ qos: 1, retain: false });
    const next = delivered(copies[0]!);
    await back.client.publishAsync(
      topics.credentialsAck(old.serial),
      JSON.stringify({ rotation_id: next.rotation_id }),
      { qos: 1 },
    );
    await back.client.endAsync();

    // A new subscriber (a clean session of the device, with its new password) gets nothing.
    const newcomer = await connectCollecting(url, { ...old, password: next.password }, { clean: true });
    await newcomer.client.subscribeAsync(topics.credentials(old.serial), { qos: 1 });
    await sleep(500);
    expect(credentialMessages(newcomer.seen, old.serial)).toEqual([]);
    await newcomer.client.endAsync();
  });

  it('the emergency rotation still revokes at once, the pending password included, and closes the session', async () => {
    const old = await claim('ROT-EMERG');
    const device = await connectCollecting(url, old);
    await device.client.subscribeAsync(topics.credentials(old.serial), { qos: 1 });
    expect((await rotate(old.serial, { mode: 'in_band' })).status).toBe(202);
    await expect.poll(() => credentialMessages(device.seen, old.serial).length).toBe(1);
    const pending = delivered(credentialMessages(device.seen, old.serial)[0]!);

    const closedNow = new Promise<void>((resolve) => device.client.once('close', () => resolve()));
    const emergency = await rotate(old.serial);
    expect(emergency.status).toBe(201);
    secrets.push(emergency.body.password as string);
    await closedNow;
    device.client.end(true);
    expect(await refusalCode(url, old)).toBe(4);
    expect(await refusalCode(url, { ...old, password: pending.password })).toBe(4);
    expect(await refusalCode(url, { ...old, password: emergency.body.password as string })).toBe(0);
  });

  it('refuses bad rotation requests with 422 and changes nothing', async () => {
    const old = await claim('ROT-BAD');
    for (const body of [
      { mode: 'sideways' },
      { mode: 'in_band', grace_s: 60 },
      { mode: 'in_band', grace_s: 31 * 86_400 },
      { mode: 'emergency', grace_s: 3600 },
      { mode: 'in_band', extra: 1 },
    ]) {
      const res = await rotate(old.serial, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.code).toBe('validation_failed');
    }
    expect(await refusalCode(url, old)).toBe(0);
    expect((await rotate('NOBODY-HERE', { mode: 'in_band' })).status).toBe(404);
  });

  it('refuses a CSR whose subject is not the serial, and counts it; a valid one is answered with a certificate on the credentials topic', async () => {
    const old = await claim('ROT-CSR');
    // Renewal is for a device that holds a certificate of the service.
    const enrolled = await account.api.post(`/api/v1/devices/${old.serial}/certificates`, {
      csr: (await makeCsr({ commonName: old.serial })).pem,
    });
    expect(enrolled.status).toBe(201);
    const device = await connectCollecting(url, old);
    await device.client.subscribeAsync(topics.credentials(old.serial), { qos: 1 });

    await device.client.publishAsync(
      topics.csr(old.serial),
      JSON.stringify({ csr: (await makeCsr({ commonName: 'SOMEONE-ELSE' })).pem }),
      {
        qos: 1,
      },
    );
    await expect
      .poll(async () => (await (await fetch(`${server.service.httpUrl}/metrics`)).text()).split('\n'))
      .toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^fleet_device_csr_refused_total\{reason="subject_mismatch"\} 1$/),
        ]),
      );
    expect(credentialMessages(device.seen, old.serial)).toEqual([]);

    const renewal = await makeCsr({ commonName: old.serial });
    await device.client.publishAsync(topics.csr(old.serial), JSON.stringify({ csr: renewal.pem }), { qos: 1 });
    await expect.poll(() => credentialMessages(device.seen, old.serial).length).toBe(1);
    const issued = JSON.parse(credentialMessages(device.seen, old.serial)[0]!.payload) as Record<string, string>;
    expect(issued).toMatchObject({ type: 'certificate' });
    expect(issued.certificate).toContain('-----BEGIN CERTIFICATE-----');
    const listed = await account.api.get(`/api/v1/devices/${old.serial}/certificates`);
    expect(
      (listed.body.certificates as Array<{ fingerprint_sha256: string; revoked_at: string | null }>).map(
        (c) => c.revoked_at,
      ),
    ).toEqual([null, null]);

    // One renewal at a time: another CSR while this one is pending is refused and counted.
    await device.client.publishAsync(topics.csr(old.serial), JSON.stringify({ csr: renewal.pem }), { qos: 1 });
    await expect
      .poll(async () => (await (await fetch(`${server.service.httpUrl}/metrics`)).text()).split('\n'))
      .toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^fleet_device_csr_refused_total\{reason="renewal_pending"\} 1$/),
        ]),
      );
    await device.client.endAsync();
  });

  it('an unclaimed serial gets CONNACK 5 (not authorized), a wrong password CONNACK 4', async () => {
    const old = await claim('ROT-GONE');
    expect(await refusalCode(url, { ...old, password: 'wrong' })).toBe(4);
    expect((await account.api.delete(`/api/v1/devices/${old.serial}`)).status).toBe(204);
    expect(await refusalCode(url, old)).toBe(5);
    expect(await refusalCode(url, { serial: 'NEVER-CLAIMED', username: 'NEVER-CLAIMED', password: 'x' })).toBe(5);
  });

  it('never logs a secret it handed out', () => {
    expect(secrets.length).toBeGreaterThanOrEqual(4);
    // The capture works: the service logged the connections and the rotations.
    expect(logged.length).toBeGreaterThan(10);
    const text = logged.join('');
    for (const secret of secrets) expect(text).not.toContain(secret);
  });
});
