import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildFirmwareVersion, buildModel } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';
import net from 'node:net';
import { Aedes } from 'aedes';

/** `npm run simulator -- ...` as a user runs it (a child process, not a TTY). */
function run(args: string[], signalAfterMs?: number): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'simulator/src/cli.ts', ...args], {
      cwd: path.resolve(__dirname, '../..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    if (signalAfterMs) {
      // SIGINT once the fleet is up, like Ctrl-C.
      const timer = setInterval(() => {
        if (out.includes('connected ')) {
          clearInterval(timer);
          setTimeout(() => child.kill('SIGINT'), signalAfterMs);
        }
      }, 50);
    }
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

describe('simulator command line', () => {
  let server: TestServer;
  let account: TestAccount;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sim-cli-'));

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    await buildModel(account, 'Luma-100');
    await buildFirmwareVersion(server, { accountId: account.accountId, model: 'Luma-100', version: '1.0.0' });
    // Generous: the embedded database starts slowly on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it('claims, saves credentials, runs for --duration and prints a summary; a second run reuses the credentials; Ctrl-C stops cleanly', async () => {
    const creds = path.join(dir, 'creds.json');
    const common = [
      '--count',
      '3',
      '--broker-url',
      server.service.mqttUrl!,
      '--api-url',
      server.service.httpUrl,
      '--api-key',
      account.apiKey,
      '--model',
      'Luma-100',
      '--firmware',
      '1.0.0',
      '--heartbeat-s',
      '0.5',
    ];
    const first = await run([
      ...common,
      '--claim',
      '--serial-prefix',
      'CLI',
      '--credentials',
      creds,
      '--duration',
      '5',
    ]);
    expect(first.code, first.err).toBe(0);
    expect(first.out).toContain('claimed 3/3');
    expect(first.out).toMatch(/connected 3\/3/);
    expect(first.out).toMatch(/summary: connected 3\/3 \| online 3/);
    expect(JSON.parse(fs.readFileSync(creds, 'utf8'))).toHaveLength(3);
    const list = (await account.api.get('/api/v1/devices?model=Luma-100')).body.devices.map(
      (d: { serial: string }) => d.serial,
    );
    expect(list).toEqual(['CLI-000001', 'CLI-000002', 'CLI-000003']);

    const second = await run([...common, '--credentials', creds], 1500);
    expect(second.code, second.err).toBe(0);
    expect(second.out).toContain('stopping (SIGINT)');
    expect(second.out).toMatch(/summary: connected 3\/3/);
  });

  it('--count 1 --verbose prints every MQTT message', async () => {
    const creds = path.join(dir, 'one.json');
    const res = await run([
      '--count',
      '1',
      '--claim',
      '--serial-prefix',
      'VERB',
      '--credentials',
      creds,
      '--broker-url',
      `ws://127.0.0.1:${server.service.httpPort}/mqtt`,
      '--api-url',
      server.service.httpUrl,
      '--api-key',
      account.apiKey,
      '--model',
      'Luma-100',
      '--firmware',
      '1.0.0',
      '--heartbeat-s',
      '0.5',
      '--duration',
      '4',
      '--verbose',
    ]);
    expect(res.code, res.err).toBe(0);
    expect(res.out).toMatch(/VERB-000001 <- CONNACK/);
    expect(res.out).toMatch(/VERB-000001 -> devices\/VERB-000001\/heartbeat \{"firmware":"1.0.0"/);
    expect(res.out).toMatch(/VERB-000001 <- devices\/VERB-000001\/config \{"version":/);
  });

  it('--signing-key checks images with the key it names, and refuses a file that is not an Ed25519 public key', async () => {
    const { publicKey } = generateKeyPairSync('ed25519');
    const keyFile = path.join(dir, 'signing-key.pub.pem');
    fs.writeFileSync(keyFile, publicKey.export({ type: 'spki', format: 'pem' }));
    const keyId = createHash('sha256')
      .update(publicKey.export({ type: 'spki', format: 'der' }))
      .digest('hex')
      .slice(0, 16);
    const common = [
      '--count',
      '1',
      '--broker-url',
      server.service.mqttUrl!,
      '--api-url',
      server.service.httpUrl,
      '--api-key',
      account.apiKey,
      '--model',
      'Luma-100',
      '--firmware',
      '1.0.0',
      '--heartbeat-s',
      '0.5',
    ];
    const ok = await run([
      ...common,
      '--claim',
      '--serial-prefix',
      'SIGNKEY',
      '--signing-key',
      keyFile,
      '--duration',
      '2',
    ]);
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toContain(`firmware signatures are checked with key ${keyId}`);
    const rsaFile = path.join(dir, 'rsa.pub.pem');
    fs.writeFileSync(
      rsaFile,
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }),
    );
    const rsa = await run([...common, '--signing-key', rsaFile]);
    expect(rsa.code).toBe(2);
    expect(rsa.err).toContain('Expected an Ed25519 key');
    const missing = await run([...common, '--signing-key', path.join(dir, 'nope.pem')]);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain('cannot be read');
  });

  it('without --broker-url, asks the service where its broker is (GET /api/v1/device-endpoints) and confirms the devices are online', async () => {
    const endpoints = await account.api.get('/api/v1/device-endpoints');
    expect(endpoints.status).toBe(200);
    expect(endpoints.body).toEqual({
      mqtt_url: `mqtt://127.0.0.1:${server.service.mqttPort}`,
      mqtts_url: null,
      websocket_url: `ws://127.0.0.1:${server.service.httpPort}/mqtt`,
    });
    const res = await run([
      '--count',
      '2',
      '--claim',
      '--serial-prefix',
      'DISC',
      '--api-url',
      server.service.httpUrl,
      '--api-key',
      account.apiKey,
      '--model',
      'Luma-100',
      '--firmware',
      '1.0.0',
      '--heartbeat-s',
      '0.5',
      '--duration',
      '1',
    ]);
    expect(res.code, res.err).toBe(0);
    expect(res.out).toContain(
      `broker: mqtt://127.0.0.1:${server.service.mqttPort} (from ${server.service.httpUrl}/api/v1/device-endpoints)`,
    );
    expect(res.out).toContain('the service sees 2 online');
    // Neither --broker-url nor the API: nothing to connect to.
    const none = await run(['--count', '1', '--firmware', '1.0.0', '--credentials', 'x.json']);
    expect(none.code).toBe(2);
    expect(none.err).toContain('--api-url and --api-key are required to ask the service for its broker');
  });

  it('devices connected to another broker: fails, saying the service sees none online', async () => {
    // Another broker that accepts anyone (a Mosquitto on 1883, say).
    const other = await Aedes.createBroker();
    const tcp = net.createServer(other.handle);
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    const port = (tcp.address() as net.AddressInfo).port;
    try {
      const res = await run([
        '--count',
        '2',
        '--claim',
        '--serial-prefix',
        'WRONG',
        '--broker-url',
        `mqtt://127.0.0.1:${port}`,
        '--api-url',
        server.service.httpUrl,
        '--api-key',
        account.apiKey,
        '--model',
        'Luma-100',
        '--firmware',
        '1.0.0',
        '--heartbeat-s',
        '0.5',
        '--duration',
        '30',
      ]);
      expect(res.out).toContain('connected 2/2');
      expect(res.code).toBe(1);
      expect(res.err).toContain(
        `2 connected to mqtt://127.0.0.1:${port} but the service at ${server.service.httpUrl} sees 0 online: is that the right broker?`,
      );
    } finally {
      await new Promise<void>((resolve) => other.close(() => resolve()));
      tcp.close();
    }
  }, 60_000);

  it('refuses bad arguments with a message and the usage', async () => {
    const res = await run(['--count', 'many', '--broker-url', 'mqtt://x']);
    expect(res.code).toBe(2);
    expect(res.err).toContain('--count must be a number');
    expect(res.err).toContain('Usage: npm run simulator');
    const noCreds = await run(['--count', '1', '--broker-url', 'mqtt://127.0.0.1:1', '--firmware', '1.0.0']);
    expect(noCreds.code).toBe(2);
    expect(noCreds.err).toContain('--credentials FILE');
  });
});
