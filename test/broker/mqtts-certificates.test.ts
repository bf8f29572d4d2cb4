import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, closed, heartbeat, type DeviceCreds } from '../helpers/mqtt';
import {
  makeCsr,
  foreignCertificateWithKey,
  writeServerCertificate,
  opensslAvailable,
  type TestCsr,
} from '../helpers/certificates';
import { mosquittoClientsAvailable } from '../helpers/tls';
import { topics } from '#protocol/topics';
import { ManualClock } from '#core/shared/clock';
import { ifStarted } from '../helpers/teardown';

/**
 * Mutual TLS on the MQTTS listener, end to end with mqtt.js and Debian's mosquitto clients.
 *
 * CONNACK codes (docs/device-certificates.md): a client id or username different from the
 * certificate's CN is 2 (identifier rejected), like a username different from the client id
 * with a password; a revoked, expired, unknown or foreign certificate is 4 (bad user name or
 * password), like a wrong password, so nothing tells which serials exist.
 */
const canRun = opensslAvailable();
if (!canRun) console.log('MQTTS certificate tests skipped: they need the openssl command');
const withMosquitto = mosquittoClientsAvailable();
if (canRun && !withMosquitto)
  console.log('MQTTS certificate tests with mosquitto_pub/mosquitto_sub skipped: mosquitto-clients is not installed');

const exec = promisify(execFile);

describe.skipIf(!canRun)('MQTTS with device certificates', () => {
  let server: TestServer;
  let account: TestAccount;
  let dir: string;
  let serverTls: { certFile: string; keyFile: string; caPem: string; caFile: string };
  let url: string;
  let creds: DeviceCreds[];
  const clock = new ManualClock(new Date());

  /** Writes a device's key and certificate as a device would keep them. */
  const deviceFiles = (serial: string, csr: TestCsr, certificatePem: string) => {
    const certFile = path.join(dir, `${serial}.pem`);
    const keyFile = path.join(dir, `${serial}.key`);
    writeFileSync(certFile, certificatePem);
    writeFileSync(keyFile, csr.privateKeyPem, { mode: 0o600 });
    return { certFile, keyFile };
  };
  const issue = async (
    serial: string,
    type?: 'P-256' | 'Ed25519',
  ): Promise<{ csr: TestCsr; certificate: string; fingerprint: string }> => {
    const csr = await makeCsr(type ? { type } : {});
    const res = await account.api.post(`/api/v1/devices/${serial}/certificates`, { csr: csr.pem });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return { csr, certificate: res.body.certificate, fingerprint: res.body.fingerprint_sha256 };
  };
  const tlsOptions = (input: { key: string; cert: string }, extra: Partial<IClientOptions> = {}): IClientOptions => ({
    key: input.key,
    cert: input.cert,
    ca: serverTls.caPem,
    // The test server certificate is for 127.0.0.1 (subjectAltName IP), the host connected to.
    rejectUnauthorized: true,
    clean: false,
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...extra,
  });
  /** CONNACK return code of an attempt (0 accepted). */
  const attempt = (options: IClientOptions): Promise<{ code: number; client?: MqttClient }> =>
    new Promise((resolve) => {
      const client = mqtt.connect(url, options);
      client.once('connect', () => resolve({ code: 0, client }));
      client.once('error', (err) => {
        client.end(true);
        resolve({ code: (err as { code?: number }).code ?? -1 });
      });
    });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'fleet-mqtts-'));
    serverTls = await writeServerCertificate(dir);
    server = await startTestServer({
      clock,
      tlsCa: serverTls.caPem,
      env: { MQTTS_PORT: '0', TLS_CERT_FILE: serverTls.certFile, TLS_KEY_FILE: serverTls.keyFile },
    });
    url = server.service.mqttsUrl!;
    account = await server.createAccount();
    creds = await claimForMqtt(server, account, ['TLS-1', 'TLS-2', 'TLS-3', 'TLS-4', 'TLS-5'], { firmware: null });
  }, 180_000);
  afterAll(async () => {
    await ifStarted(server)?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('mqtt.js: a valid certificate connects with client id = CN and no username or password, and the device works', async () => {
    const { csr, certificate } = await issue('TLS-1');
    const { code, client } = await attempt(
      tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-1' }),
    );
    expect(code).toBe(0);
    await client!.publishAsync(topics.heartbeat('TLS-1'), heartbeat(), { qos: 1 });
    await expect.poll(async () => (await account.api.get('/api/v1/devices/TLS-1')).body.status).toBe('online');
    // With a username, it must equal the client id.
    await client!.endAsync();
    expect(
      (
        await attempt(
          tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-1', username: 'TLS-1' }),
        )
      ).code,
    ).toBe(0);
  });

  it('mqtt.js: an Ed25519 device certificate authenticates in a real handshake too', async () => {
    await claimForMqtt(server, account, ['TLS-ED'], { firmware: null });
    const { csr, certificate } = await issue('TLS-ED', 'Ed25519');
    const { code, client } = await attempt(
      tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-ED' }),
    );
    expect(code).toBe(0);
    await client!.publishAsync(topics.heartbeat('TLS-ED'), heartbeat(), { qos: 1 });
    await expect.poll(async () => (await account.api.get('/api/v1/devices/TLS-ED')).body.status).toBe('online');
    await client!.endAsync();
  });

  it('mqtt.js: a client id or username other than the CN is refused with CONNACK 2', async () => {
    const { csr, certificate } = await issue('TLS-2');
    expect((await attempt(tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-3' }))).code).toBe(
      2,
    );
    expect(
      (
        await attempt(
          tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-2', username: 'TLS-3' }),
        )
      ).code,
    ).toBe(2);
  });

  it('mqtt.js: revoking closes the live session at once and refuses the certificate with CONNACK 4', async () => {
    const { csr, certificate, fingerprint } = await issue('TLS-3');
    const { client } = await attempt(tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-3' }));
    expect((await account.api.delete(`/api/v1/devices/TLS-3/certificates/${fingerprint}`)).status).toBe(200);
    expect(await closed(client!)).toBe(true);
    client!.end(true);
    expect((await attempt(tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-3' }))).code).toBe(
      4,
    );
  });

  it('mqtt.js: a certificate of another CA, or past its validity, is refused with CONNACK 4', async () => {
    // The TLS handshake succeeds (the listener takes any client certificate); the service refuses it.
    const foreign = await foreignCertificateWithKey('TLS-4');
    expect(
      (await attempt(tlsOptions({ key: foreign.privateKeyPem, cert: foreign.certificate }, { clientId: 'TLS-4' })))
        .code,
    ).toBe(4);
    const { csr, certificate } = await issue('TLS-4');
    clock.advance(3651 * 86_400_000);
    try {
      expect(
        (await attempt(tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-4' }))).code,
      ).toBe(4);
    } finally {
      clock.advance(-3651 * 86_400_000);
    }
  });

  it('mqtt.js: passwords keep working over MQTTS (no client certificate) and over plain MQTT', async () => {
    const device = creds.find((c) => c.serial === 'TLS-5')!;
    const { code, client } = await attempt({
      ca: serverTls.caPem,
      clientId: device.serial,
      username: device.username,
      password: device.password,
      reconnectPeriod: 0,
    });
    expect(code).toBe(0);
    await client!.endAsync();
  });

  it('mqtt.js: a device renews its certificate over its session (CSR on csr, certificate on credentials); connecting with the new one retires the old', async () => {
    const [device] = await claimForMqtt(server, account, ['TLS-RENEW'], { firmware: null });
    const { csr, certificate } = await issue(device!.serial);
    const first = await attempt(tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-RENEW' }));
    expect(first.code).toBe(0);
    const client = first.client!;
    await client.subscribeAsync(topics.credentials('TLS-RENEW'), { qos: 1 });
    const delivered = new Promise<{ certificate: string; rotation_id: string }>((resolve) =>
      client.on('message', (topic, payload) => {
        if (topic === topics.credentials('TLS-RENEW')) resolve(JSON.parse(payload.toString()));
      }),
    );
    const renewal = await makeCsr({ commonName: 'TLS-RENEW' });
    await client.publishAsync(topics.csr('TLS-RENEW'), JSON.stringify({ csr: renewal.pem }), { qos: 1 });
    const message = await delivered;
    await client.publishAsync(
      topics.credentialsAck('TLS-RENEW'),
      JSON.stringify({ rotation_id: message.rotation_id }),
      {
        qos: 1,
      },
    );
    await client.endAsync();
    // Acknowledged, not yet used: the old certificate still works.
    const old = await attempt(tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-RENEW' }));
    expect(old.code).toBe(0);
    await old.client!.endAsync();
    const fresh = await attempt(
      tlsOptions({ key: renewal.privateKeyPem, cert: message.certificate }, { clientId: 'TLS-RENEW' }),
    );
    expect(fresh.code).toBe(0);
    await fresh.client!.endAsync();
    const codeOf = async (options: IClientOptions) => {
      const tried = await attempt(options);
      await tried.client?.endAsync(true);
      return tried.code;
    };
    await expect
      .poll(() => codeOf(tlsOptions({ key: csr.privateKeyPem, cert: certificate }, { clientId: 'TLS-RENEW' })))
      .toBe(4);
    const listed = await account.api.get('/api/v1/devices/TLS-RENEW/certificates');
    expect(
      (listed.body.certificates as Array<{ revoked_reason: string | null }>).map((c) => c.revoked_reason).sort(),
    ).toEqual(['superseded', null].sort());
  });

  it.skipIf(!withMosquitto)(
    'mosquitto_pub: publishes with --cert/--key and -i <serial>; another -i is refused',
    async () => {
      const { csr, certificate } = await issue('TLS-5');
      const files = deviceFiles('TLS-5', csr, certificate);
      const port = String(server.service.mqttsPort);
      const base = [
        '-h',
        '127.0.0.1',
        '-p',
        port,
        '--cafile',
        serverTls.caFile,
        '--cert',
        files.certFile,
        '--key',
        files.keyFile,
        '-V',
        'mqttv311',
      ];
      await exec('mosquitto_pub', [
        ...base,
        '-q',
        '1',
        '-i',
        'TLS-5',
        '-t',
        topics.heartbeat('TLS-5'),
        '-m',
        heartbeat(),
      ]);
      const refused = await exec('mosquitto_pub', [
        ...base,
        '-q',
        '1',
        '-i',
        'TLS-1',
        '-t',
        topics.heartbeat('TLS-1'),
        '-m',
        heartbeat(),
      ]).catch((error: unknown) => error as { stderr?: string });
      expect(String(refused.stderr)).toMatch(/identifier rejected/i);
      // mosquitto_sub receives the configuration of its own device (sent once on subscribe).
      const sub = await exec('mosquitto_sub', [
        ...base,
        '-q',
        '1',
        '-i',
        'TLS-5',
        '-c',
        '-t',
        topics.config('TLS-5'),
        '-C',
        '1',
        '-W',
        '5',
      ]);
      expect(JSON.parse(sub.stdout)).toMatchObject({ version: 1 });
    },
  );
});
