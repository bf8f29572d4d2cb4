import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildFirmwareVersion, buildModel } from '../helpers/factories';
import { makeTlsFiles, opensslAvailable, type TlsFiles } from '../helpers/tls';
import { ifStarted } from '../helpers/teardown';

function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'simulator/src/cli.ts', ...args], {
      cwd: path.resolve(__dirname, '../..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

const canRun = opensslAvailable();
if (!canRun) console.log('simulator TLS tests skipped: they need the openssl command');

/**
 * The simulator against a TLS-only service (MQTT_PORT=off): `--ca` for HTTPS and MQTTS, and
 * `--cert-dir` so the claim signs a key and CSR per device and the devices then connect by
 * certificate, with no password.
 */
describe.skipIf(!canRun)('simulator on mutual TLS', () => {
  let files: TlsFiles;
  let server: TestServer;
  let account: TestAccount;

  beforeAll(async () => {
    files = makeTlsFiles();
    server = await startTestServer({
      tlsCa: fs.readFileSync(files.caFile, 'utf8'),
      env: { TLS_CERT_FILE: files.certFile, TLS_KEY_FILE: files.keyFile, MQTTS_PORT: '0', MQTT_PORT: 'off' },
    });
    account = await server.createAccount();
    await buildModel(account, 'Luma-100');
    await buildFirmwareVersion(server, { accountId: account.accountId, model: 'Luma-100', version: '1.0.0' });
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it(
    'claims with a CSR per device, keeps each key and certificate, and connects the fleet by certificate',
    { timeout: 120_000 },
    async () => {
      const creds = path.join(files.dir, 'creds.json');
      const certDir = path.join(files.dir, 'devices');
      const common = [
        '--count',
        '20',
        '--broker-url',
        server.service.mqttsUrl!,
        '--ca',
        files.caFile,
        '--model',
        'Luma-100',
        '--firmware',
        '1.0.0',
        '--heartbeat-s',
        '0.5',
        '--duration',
        '4',
      ];
      const first = await run([
        ...common,
        '--claim',
        '--api-url',
        server.service.httpUrl,
        '--api-key',
        account.apiKey,
        '--serial-prefix',
        'MTLS',
        '--credentials',
        creds,
        '--cert-dir',
        certDir,
      ]);
      expect(first.code, first.err).toBe(0);
      expect(first.out).toContain('20 device keys and certificates saved');
      expect(first.out).toMatch(/summary: connected 20\/20 \| online 20/);
      expect(fs.statSync(path.join(certDir, 'MTLS-000001.key')).mode & 0o077).toBe(0);
      expect(fs.readFileSync(creds, 'utf8')).not.toContain('PRIVATE KEY');
      const listed = await account.api.get('/api/v1/devices/MTLS-000007/certificates');
      expect(listed.body.certificates).toHaveLength(1);

      // The passwords are now wrong: only the certificates can get the devices in.
      const saved = JSON.parse(fs.readFileSync(creds, 'utf8')) as Array<{ password: string }>;
      fs.writeFileSync(creds, JSON.stringify(saved.map((c) => ({ ...c, password: 'not-the-password' }))));
      const byPassword = await run([...common, '--credentials', creds]);
      expect(byPassword.code).toBe(1);
      const byCertificate = await run([...common, '--credentials', creds, '--cert-dir', certDir]);
      expect(byCertificate.code, byCertificate.err).toBe(0);
      expect(byCertificate.out).toContain('20 of 20 devices connect by certificate');
      expect(byCertificate.out).toMatch(/summary: connected 20\/20 \| online 20/);
    },
  );
});
