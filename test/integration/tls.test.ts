import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync, writeFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import tls from 'node:tls';
import mqtt from 'mqtt';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { heartbeat } from '../helpers/mqtt';
import {
  curlAvailable,
  makeTlsFiles,
  mosquittoClientsAvailable,
  opensslAvailable,
  type TlsFiles,
} from '../helpers/tls';
import { topics } from '#protocol/topics';
import { collect, wsClient } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';

const run = promisify(execFile);
const canRun = opensslAvailable() && curlAvailable();
if (!canRun) console.log('TLS tests skipped: they need the openssl and curl commands');
const withMosquitto = mosquittoClientsAvailable();
if (canRun && !withMosquitto)
  console.log('TLS tests with mosquitto_pub/mosquitto_sub skipped: mosquitto-clients is not installed');

/**
 * TLS_CERT_FILE/TLS_KEY_FILE set: HTTPS on PORT (REST, GraphQL, downloads, MQTT over wss) and
 * MQTT over TLS on MQTTS_PORT, with MQTT_PORT=off for a TLS-only service, driven by clients
 * written by others (curl, mosquitto_pub/sub, openssl) and mqtt.js, trusting a private CA.
 */
describe.skipIf(!canRun)('TLS for people and devices', () => {
  let files: TlsFiles & { renew(): void };
  let server: TestServer;
  let account: TestAccount;
  let ca: Buffer;
  let https: string;

  const curl = async (args: string[]) =>
    (await run('curl', ['-sS', '--cacert', files.caFile, ...args], { maxBuffer: 64 * 1024 * 1024 })).stdout;
  const api = async (method: string, route: string, body?: unknown) =>
    JSON.parse(
      await curl([
        '-X',
        method,
        '-H',
        `Authorization: Bearer ${account.apiKey}`,
        ...(body ? ['-H', 'Content-Type: application/json', '-d', JSON.stringify(body)] : []),
        `${https}${route}`,
      ]),
    );

  beforeAll(async () => {
    files = makeTlsFiles();
    ca = readFileSync(files.caFile);
    server = await startTestServer({
      env: { TLS_CERT_FILE: files.certFile, TLS_KEY_FILE: files.keyFile, MQTTS_PORT: '0', MQTT_PORT: 'off' },
    });
    account = await server.createAccount();
    https = server.service.httpUrl;
    const model = await api('POST', '/api/v1/models', { name: 'LX-T' });
    expect(model.model.name).toBe('LX-T');
  }, 120_000);
  afterAll(async () => ifStarted(server)?.close());

  it('serves REST over HTTPS only; the session cookie is Secure; download links default to https', async () => {
    expect(https).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect((await api('GET', '/api/v1/allocation')).quota).toBe(1000);
    const headers = await curl([
      '-D',
      '-',
      '-o',
      '/dev/null',
      '-H',
      'Content-Type: application/json',
      '-d',
      JSON.stringify({ email: account.adminEmail, password: account.adminPassword }),
      `${https}/api/v1/session`,
    ]);
    expect(headers).toMatch(/set-cookie: fleet_session=[^\r\n]*; Secure/i);
    // Plain HTTP to the HTTPS port gets no answer of the service.
    await expect(
      run('curl', ['-sS', '--max-time', '5', `http://127.0.0.1:${server.service.httpPort}/healthz`]),
    ).rejects.toThrow();
    // Without trusting the CA, a client refuses the service.
    await expect(run('curl', ['-sS', '--max-time', '5', `${https}/healthz`])).rejects.toThrow();
  });

  it('serves GraphQL over https, its subscriptions over wss, and the portal over HTTPS', async () => {
    const query = JSON.parse(
      await curl([
        '-H',
        'Content-Type: application/json',
        '-H',
        `Authorization: Bearer ${account.apiKey}`,
        '-d',
        JSON.stringify({ query: '{ viewer { role account { id } } }' }),
        `${https}/graphql`,
      ]),
    );
    expect(query.data.viewer).toEqual({ role: 'admin', account: { id: account.accountId } });

    const client = wsClient(https, { apiKey: account.apiKey, ca });
    const live = collect<{ data: { deviceChanged: { device: { serial: string; status: string } } } }>(
      client,
      'subscription { deviceChanged { device { serial status } } }',
    );
    try {
      await new Promise((r) => setTimeout(r, 300)); // subscription acknowledged
      const claimed = await api('POST', '/api/v1/devices/claim', { serials: ['TLS-WSS'], model: 'LX-T' });
      const creds = claimed.devices[0].credentials as { username: string; password: string };
      const device = await mqtt.connectAsync(server.service.mqttsUrl!, {
        ca,
        clientId: 'TLS-WSS',
        username: creds.username,
        password: creds.password,
        clean: false,
        reconnectPeriod: 0,
      });
      await device.publishAsync(topics.heartbeat('TLS-WSS'), JSON.stringify({ firmware: '1.0.0' }), { qos: 1 });
      await live.until(() =>
        live.items.some(
          (i) => i.data.deviceChanged.device.serial === 'TLS-WSS' && i.data.deviceChanged.device.status === 'online',
        ),
      );
      await device.endAsync();
    } finally {
      live.dispose();
      await client.dispose();
    }

    const portal = await curl(['-D', '-', `${https}/`]);
    expect(portal).toMatch(/^HTTP\/1\.1 200/);
    expect(portal).toMatch(/content-security-policy:/i);
    expect(portal).toContain('<div id="app">');
  });

  it('refuses TLS below 1.2', async () => {
    const attempt = (maxVersion: tls.SecureVersion) =>
      new Promise<string>((resolve) => {
        const socket = tls.connect(
          { host: '127.0.0.1', port: server.service.httpPort, ca, minVersion: 'TLSv1', maxVersion },
          () => {
            resolve(socket.getProtocol() ?? 'none');
            socket.end();
          },
        );
        socket.on('error', () => resolve('refused'));
      });
    expect(await attempt('TLSv1.2')).toBe('TLSv1.2');
    expect(await attempt('TLSv1.1')).toBe('refused');
  });

  it('MQTT_PORT=off: no plain MQTT listener; a plain MQTT client on the TLS port gets no session', async () => {
    expect(server.service.mqttPort).toBeNull();
    expect(server.service.mqttUrl).toBeNull();
    const plain = mqtt.connect(`mqtt://127.0.0.1:${server.service.mqttsPort}`, {
      clientId: 'TLS-PLAIN',
      connectTimeout: 4000,
      reconnectPeriod: 0,
    });
    const outcome = await new Promise<string>((resolve) => {
      plain.once('connect', () => resolve('connected'));
      plain.once('error', () => resolve('refused'));
      plain.once('close', () => resolve('refused'));
    });
    plain.end(true);
    expect(outcome).toBe('refused');
  });

  it('a device on MQTTS gets its OTA command with an https link, and downloads the image over HTTPS', async () => {
    const image = randomBytes(100_000);
    const form = path.join(files.dir, 'fw.bin');
    writeFileSync(form, image);
    const uploaded = JSON.parse(
      await curl([
        '-H',
        `Authorization: Bearer ${account.apiKey}`,
        '-F',
        'model=LX-T',
        '-F',
        'version=2.0.0',
        '-F',
        'release_notes=TLS',
        '-F',
        'changelog=-',
        '-F',
        `file=@${form}`,
        `${https}/api/v1/firmware/versions`,
      ]),
    );
    expect(uploaded.firmware_version.sha256).toBe(createHash('sha256').update(image).digest('hex'));
    const claimed = await api('POST', '/api/v1/devices/claim', {
      serials: ['TLS-1'],
      model: 'LX-T',
      firmware: '2.0.0',
    });
    const creds = claimed.devices[0].credentials as { username: string; password: string };
    const device = await mqtt.connectAsync(server.service.mqttsUrl!, {
      ca,
      clientId: 'TLS-1',
      username: creds.username,
      password: creds.password,
      clean: false,
      reconnectPeriod: 0,
    });
    const command = new Promise<{ url: string; sha256: string }>((resolve) =>
      device.on(
        'message',
        (topic, payload) => topic === topics.ota('TLS-1') && resolve(JSON.parse(payload.toString())),
      ),
    );
    await device.subscribeAsync(topics.ota('TLS-1'), { qos: 1 });
    await device.publishAsync(topics.heartbeat('TLS-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    const { url, sha256 } = await command;
    expect(url.startsWith(`${https}/firmware/download/`)).toBe(true);
    const out = path.join(files.dir, 'downloaded.bin');
    await curl(['-o', out, url]);
    expect(createHash('sha256').update(readFileSync(out)).digest('hex')).toBe(sha256);
    await device.endAsync();

    // MQTT over wss on the HTTPS port, same credentials.
    const ws = await mqtt.connectAsync(`${https.replace('https', 'wss')}/mqtt`, {
      ca,
      clientId: 'TLS-1',
      username: creds.username,
      password: creds.password,
      clean: false,
      reconnectPeriod: 0,
    });
    expect(ws.connected).toBe(true);
    await ws.endAsync();
  });

  it.skipIf(!withMosquitto)('mosquitto_pub and mosquitto_sub talk to MQTTS with --cafile', async () => {
    const claimed = await api('POST', '/api/v1/devices/claim', { serials: ['TLS-MOSQ'], model: 'LX-T' });
    const { password } = claimed.devices[0].credentials as { password: string };
    expect(
      (await api('PATCH', '/api/v1/devices/TLS-MOSQ', { config: { dim_level: 42 } })).config.desired.dim_level,
    ).toBe(42);
    const common = [
      '-h',
      '127.0.0.1',
      '-p',
      String(server.service.mqttsPort),
      '--cafile',
      files.caFile,
      '-i',
      'TLS-MOSQ',
      '-u',
      'TLS-MOSQ',
      '-P',
      password,
      '-q',
      '1',
    ];
    // The desired configuration arrives on subscribe (once per connection).
    const { stdout } = await run('mosquitto_sub', [...common, '-t', topics.config('TLS-MOSQ'), '-C', '1', '-W', '10']);
    expect(JSON.parse(stdout).config.dim_level).toBe(42);
    await run('mosquitto_pub', [
      ...common,
      '-t',
      topics.heartbeat('TLS-MOSQ'),
      '-m',
      heartbeat({ firmware: '3.1.4', ip: '10.9.9.9' }),
    ]);
    await server.service.ingest.flush();
    expect(await api('GET', '/api/v1/devices/TLS-MOSQ')).toMatchObject({ firmware: '3.1.4', ip: '10.9.9.9' });
    // A wrong password over TLS is refused like over plain MQTT.
    await expect(
      run('mosquitto_pub', [
        ...common.slice(0, -3),
        '-P',
        'wrong',
        '-q',
        '1',
        '-t',
        topics.heartbeat('TLS-MOSQ'),
        '-m',
        '{}',
      ]),
    ).rejects.toThrow();
  });

  it('serves a renewed certificate without a restart, on HTTPS and MQTTS', async () => {
    const fingerprint = (port: number) =>
      new Promise<string>((resolve, reject) => {
        const socket = tls.connect({ host: '127.0.0.1', port, ca }, () => {
          resolve(socket.getPeerCertificate().fingerprint256);
          socket.end();
        });
        socket.on('error', reject);
      });
    const before = await fingerprint(server.service.httpPort);
    expect(await fingerprint(server.service.mqttsPort!)).toBe(before);
    files.renew();
    await expect.poll(() => fingerprint(server.service.httpPort), { timeout: 15_000, interval: 500 }).not.toBe(before);
    const after = await fingerprint(server.service.httpPort);
    await expect.poll(() => fingerprint(server.service.mqttsPort!), { timeout: 15_000, interval: 500 }).toBe(after);
    expect((await api('GET', '/api/v1/allocation')).quota).toBe(1000);
  });
});
