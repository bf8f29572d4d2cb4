import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawnSync } from 'node:child_process';
import { createHash, createPublicKey } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';

const root = path.resolve(__dirname, '../..');
const TOOLS = ['openssl', 'curl', 'jq', 'bash'];
const missing = TOOLS.filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
if (missing.length)
  console.warn(
    `[signed firmware doc] skipped: ${missing.join(', ')} not found (install them to run the documented commands: apt-get install -y openssl curl jq)`,
  );

/** The ```lang blocks of a Markdown text, in order. */
const blocks = (markdown: string, lang: string) =>
  [...markdown.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);

/** Runs a shell script without blocking this process (the server under test answers its curl calls). */
function bash(script: string, cwd: string): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-euo', 'pipefail', '-c', script], { cwd, timeout: 60_000 }, (error, out, err) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    );
  });
}

const keyIdOf = (pemFile: string) =>
  createHash('sha256')
    .update(createPublicKey(fs.readFileSync(pemFile)).export({ type: 'spki', format: 'der' }))
    .digest('hex')
    .slice(0, 16);

/**
 * docs/signed-firmware.md is what a newcomer types: its shell blocks run here as written (only
 * the API address and key are filled in) against a real server, and the Node check of
 * docs/device-protocol.md verifies what they produced.
 */
describe.skipIf(missing.length > 0)('signed firmware document', { timeout: 120_000 }, () => {
  let server: TestServer;
  let account: TestAccount;
  // Made in beforeAll: a skipped suite runs no hooks, and would never remove a folder made here.
  let dir = '';
  const doc = fs.readFileSync(path.join(root, 'docs/signed-firmware.md'), 'utf8');

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'signed-fw-doc-'));
    server = await startTestServer();
    account = await server.createAccount();
    await buildModel(account, 'Luma-100');
  }, 60_000);
  afterAll(async () => {
    await ifStarted(server)?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('its commands make a key pair, register it, sign and upload a release, rotate the key, and sign a release uploaded before the key', async () => {
    const script = blocks(doc, 'sh').join('\n');
    const filled = script
      .replace(/^export API=http:\/\/localhost:8080\/api\/v1$/m, `export API=${server.service.httpUrl}/api/v1`)
      .replace(/^export KEY=flk_\.\.\..*$/m, `export KEY=${account.apiKey}`);
    expect(filled).toContain(`export API=${server.service.httpUrl}/api/v1`);
    expect(filled).toContain(`export KEY=${account.apiKey}`);
    for (const command of [
      'openssl genpkey -algorithm ed25519',
      'openssl pkey -in signing-key.pem -pubout',
      'openssl pkeyutl -sign -inkey signing-key.pem -rawin',
      '-X PUT',
      '/signature',
    ])
      expect(script).toContain(command);

    const run = await bash(filled, dir);
    expect(run.code, `${run.out}\n${run.err}`).toBe(0);
    expect(run.out).toContain('Signature Verified Successfully');
    const firstKey = keyIdOf(path.join(dir, 'signing-key.pub.pem'));
    const secondKey = keyIdOf(path.join(dir, 'signing-key-2.pub.pem'));
    expect(run.out).toContain(firstKey);
    expect(run.out).toMatch(/"signed": true/);

    const version = (await account.api.get('/api/v1/firmware/versions?model=Luma-100')).body.versions[0];
    expect(version).toMatchObject({
      version: '1.2.0',
      signed: true,
      key_id: firstKey,
      sha256: createHash('sha256')
        .update(fs.readFileSync(path.join(dir, 'fw-1.2.0.bin')))
        .digest('hex'),
    });
    const keys = (await account.api.get('/api/v1/firmware/signing-key')).body;
    expect(keys.signing_key.key_id).toBe(secondKey);
    expect(keys.retired_keys.map((k: { key_id: string }) => k.key_id)).toEqual([firstKey]);
    // The private key stayed where it was made.
    expect(JSON.stringify(keys)).not.toContain('PRIVATE KEY');

    // Section 6: the release uploaded before the key was refused (dry run), then signed with the
    // current key, after which the dry run went.
    expect(run.out).toMatch(/"code": "firmware_unsigned"/);
    const old = (await account.api.get('/api/v1/firmware/versions?model=Luma-100')).body.versions.find(
      (v: { version: string }) => v.version === '1.1.0',
    );
    expect(old).toMatchObject({ signed: true, key_id: secondKey });
    expect(run.out).toMatch(/"dry_run": true/);
  });

  it('the Node check of the device protocol accepts the signed image and refuses a changed one', async () => {
    const protocol = fs.readFileSync(path.join(root, 'docs/device-protocol.md'), 'utf8');
    const [snippet] = blocks(protocol.slice(protocol.indexOf('### Signed firmware')), 'js');
    expect(snippet).toContain('function verifyImage(command, image)');
    const version = (await account.api.get('/api/v1/firmware/versions?model=Luma-100')).body.versions[0];
    const command = { sha256: version.sha256, signature: version.signature, key_id: version.key_id };
    fs.writeFileSync(
      path.join(dir, 'verify.mjs'),
      `${snippet}\nconst command = JSON.parse(process.argv[2]);\nconsole.log(verifyImage(command, readFileSync(process.argv[3])) ?? 'install');\n`,
    );
    const tampered = fs.readFileSync(path.join(dir, 'fw-1.2.0.bin'));
    tampered.writeUInt8(tampered.readUInt8(0) ^ 1, 0);
    fs.writeFileSync(path.join(dir, 'tampered.bin'), tampered);
    const check = (image: string, cmd: object) => bash(`node verify.mjs '${JSON.stringify(cmd)}' ${image}`, dir);
    expect((await check('fw-1.2.0.bin', command)).out.trim()).toBe('install');
    expect((await check('tampered.bin', command)).out.trim()).toBe('sha256 mismatch');
    // A changed image with its own digest: only the signature tells.
    const forged = { ...command, sha256: createHash('sha256').update(tampered).digest('hex') };
    expect((await check('tampered.bin', forged)).out.trim()).toBe('signature_invalid: does not verify');
    expect((await check('fw-1.2.0.bin', { ...command, key_id: '0'.repeat(16) })).out.trim()).toBe(
      'signature_invalid: not signed with a trusted key',
    );
  });
});
