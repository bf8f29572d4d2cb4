import { afterAll, describe, expect, it } from 'vitest';
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestServer, type TestServer } from '../helpers/test-server';
import { ifStarted } from '../helpers/teardown';

const root = path.resolve(__dirname, '../..');
const TOOLS = ['openssl', 'curl', 'jq', 'bash', 'mosquitto_pub', 'mosquitto_sub'];
const missing = TOOLS.filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
if (missing.length) console.log(`README production commands skipped: ${missing.join(', ')} not found`);

function bash(script: string, cwd: string): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-euo', 'pipefail', '-c', script], { cwd, timeout: 60_000 }, (error, out, err) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    );
  });
}

/**
 * The README's "Production" section is what a newcomer pastes: its shell blocks run here as
 * written, with only the ports the test server got, the API key, and the serial's password
 * filled in (the `npm start` line is this test's own server with the files those commands made).
 */
describe.skipIf(missing.length > 0)('README production commands', () => {
  let server: TestServer;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-prod-'));
  afterAll(async () => {
    await ifStarted(server)?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it(
    'make a certificate, serve TLS, connect a device by password and by certificate, revoke it, upload signed firmware',
    { timeout: 180_000 },
    async () => {
      const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
      const section = readme.slice(
        readme.indexOf('## Production: TLS, device certificates, signed firmware'),
        readme.indexOf('## Operator tool'),
      );
      const [tlsBlock, certificateBlock, signingBlock] = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
        m[1]!.replace(/\\\n\s*/g, ''),
      );
      expect(tlsBlock).toContain(
        'TLS_CERT_FILE=.local/server.pem TLS_KEY_FILE=.local/server.key PORT=8443 MQTT_PORT=off npm start',
      );
      const [makeFiles, afterStart] = tlsBlock!.split(/^.*npm start.*$/m) as [string, string];

      const made = await bash(makeFiles, dir);
      expect(made.code, made.err).toBe(0);
      const ca = fs.readFileSync(path.join(dir, '.local', 'ca.pem'), 'utf8');
      server = await startTestServer({
        tlsCa: ca,
        env: {
          TLS_CERT_FILE: path.join(dir, '.local', 'server.pem'),
          TLS_KEY_FILE: path.join(dir, '.local', 'server.key'),
          MQTT_PORT: 'off',
          MQTTS_PORT: '0',
        },
      });
      const account = await server.createAccount();
      expect((await account.api.post('/api/v1/models', { name: 'LX-200' })).status).toBe(201);
      const claim = await account.api.post('/api/v1/devices/claim', { serials: ['LX200-000001'], model: 'LX-200' });
      expect(claim.status).toBe(201);
      const ports = (script: string) =>
        script
          .replaceAll('localhost:8443', `localhost:${server.service.httpPort}`)
          .replaceAll('-p 8883', `-p ${server.service.mqttsPort}`);

      const clients = await bash(
        ports(afterStart)
          .replaceAll('<serial>', 'LX200-000001')
          .replace('<password>', claim.body.devices[0].credentials.password),
        dir,
      );
      expect(clients.code, clients.err).toBe(0);
      expect(clients.out).toContain('{"status":"ok"}');
      expect(JSON.parse(clients.out.slice(clients.out.indexOf('{"version"')))).toMatchObject({ version: 1 });

      const certified = await bash(`KEY=${account.apiKey}\n${ports(certificateBlock!)}`, dir);
      expect(certified.code, `${certified.out}\n${certified.err}`).toBe(0);
      // The device CA came with the API key: a PEM certificate, not a 401 answer.
      expect(fs.readFileSync(path.join(dir, '.local', 'device-ca.pem'), 'utf8')).toMatch(
        /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n?$/,
      );
      await expect
        .poll(async () => (await account.api.get('/api/v1/devices/LX200-000001')).body.firmware)
        .toBe('1.0.0');
      const certificates = (await account.api.get('/api/v1/devices/LX200-000001/certificates')).body.certificates;
      expect(certificates).toHaveLength(1);
      expect(certificates[0].revoked_at).not.toBeNull();

      // Signed firmware: the block makes its own image; KEY is the Quick start placeholder.
      const signed = await bash(`KEY=${account.apiKey}\n${ports(signingBlock!)}`, dir);
      expect(signed.code, `${signed.out}\n${signed.err}`).toBe(0);
      const keyId = (await account.api.get('/api/v1/firmware/signing-key')).body.signing_key.key_id as string;
      expect(JSON.parse(signed.out.slice(signed.out.lastIndexOf('{\n')))).toEqual({
        version: '1.2.0',
        signed: true,
        key_id: keyId,
      });

      // Every file those commands made is in .local/, which git ignores: no private key or
      // device password is left for `git add -A` in the repository root.
      expect(fs.readdirSync(dir)).toEqual(['.local']);
      expect(fs.readdirSync(path.join(dir, '.local'))).toEqual(
        expect.arrayContaining(['ca.key', 'server.key', 'signing-key.pem', 'LX200-000001.key']),
      );
      const ignored = spawnSync('git', ['check-ignore', '--no-index', '.local/ca.key', '.local/demo-devices.json'], {
        cwd: root,
      });
      expect(ignored.stdout.toString().trim().split('\n')).toEqual(['.local/ca.key', '.local/demo-devices.json']);
    },
  );
});
