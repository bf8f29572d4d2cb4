import { afterAll, describe, expect, it } from 'vitest';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestServer, type TestServer } from '../helpers/test-server';
import { buildFirmwareVersion, buildModel } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';

const root = path.resolve(__dirname, '../..');
const TOOLS = ['curl', 'bash', 'grep'];
const missing = TOOLS.filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
if (missing.length) console.log(`README walkthrough skipped: ${missing.join(', ')} not found`);

function bash(
  script: string,
  cwd: string,
  env: Record<string, string>,
): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['-euo', 'pipefail', '-c', script],
      { cwd, timeout: 120_000, env: { ...process.env, ...env } },
      (error, out, err) => resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    );
  });
}

/** The ```sh blocks of a README section, in order, with line continuations joined. */
function blocks(readme: string, from: string, to: string): string[] {
  const section = readme.slice(readme.indexOf(from), readme.indexOf(to));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/\\\n\s*/g, ''));
}

/**
 * The README's newcomer path as pasted: the Quick start's placeholder block, the REST examples and
 * the simulator, against a running service (this test's own server stands for `npm start`), in a
 * fresh working folder. Only the documented placeholder (`export KEY=flk_...`) and the HTTP port
 * the test server got are substituted; the MQTT port is never named by the README (the simulator
 * asks the service), so the service's broker is not on 1883 here, as where 1883 is taken.
 */
describe.skipIf(missing.length > 0)('README walkthrough: quick start, REST examples, simulator', () => {
  let server: TestServer;
  let simulator: ChildProcess | undefined;
  // A fresh working copy: the repository's files linked in, no .local/ and no data/ yet.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-walk-'));
  const linked = fs.readdirSync(root).filter((name) => !['.local', 'data', '.git'].includes(name));
  for (const name of linked) fs.symlinkSync(path.join(root, name), path.join(dir, name));
  afterAll(async () => {
    // npm, its shell and the simulator: the whole process group, by its leader's PID.
    if (simulator?.pid && simulator.exitCode === null && simulator.signalCode === null) {
      try {
        process.kill(-simulator.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await ifStarted(server)?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('every block runs as pasted and does what the text says', { timeout: 240_000 }, async () => {
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    const [install, placeholder] = blocks(readme, '## Quick start', '## What runs');
    expect(install).toMatch(/npm install && npm start/); // install/test commands: left to CI
    expect(placeholder!.trim()).toMatch(/^export KEY=flk_\.\.\. +# placeholder/);

    server = await startTestServer();
    expect(server.service.mqttPort).not.toBe(1883);
    // The demo account `npm start` makes on a fresh folder: the model Luma-100 and its 1.0.0.
    const account = await server.createAccount();
    await buildModel(account, 'Luma-100');
    await buildFirmwareVersion(server, { accountId: account.accountId, model: 'Luma-100', version: '1.0.0' });
    const port = (script: string) =>
      script
        .replaceAll('localhost:8080', `localhost:${server.service.httpPort}`)
        .replaceAll('127.0.0.1:8080', `127.0.0.1:${server.service.httpPort}`);
    // The one substitution the README documents: the placeholder line, with the key.
    const keyLine = placeholder!.replace(/flk_\.\.\./, account.apiKey);
    const env = { PATH: process.env.PATH ?? '' };

    const [rest] = blocks(readme, '## REST API', '## Devices and the simulator');
    const restRun = await bash(`${keyLine}\n${port(rest!)}`, dir, env);
    expect(restRun.code, `${restRun.out}\n${restRun.err}`).toBe(0);
    // The answers follow each other without newlines: read them with patterns, and the effects
    // through the API.
    expect(restRun.out).not.toContain('"code"'); // no problem+json answer anywhere
    expect([...restRun.out.matchAll(/ HTTP (\d+)/g)].map((m) => m[1])).toEqual(['201', '201']); // the uploads
    expect(restRun.out).toContain('"name":"LX-200"');
    const versions = (await account.api.get('/api/v1/firmware/versions?model=LX-200')).body;
    expect(JSON.stringify(versions)).toMatch(/"version":"1\.4\.2"[\s\S]*|"version":"1\.5\.0"/);
    const claimed = (await account.api.get('/api/v1/devices?model=LX-200')).body;
    expect(claimed.devices.map((d: { serial: string }) => d.serial)).toEqual(['LX200-000001', 'LX200-000002']);
    expect(restRun.out).toContain('"total":2'); // the list, as its comment says
    // the deploy: 202 with the deployment's id and its 2 targets
    expect(restRun.out).toMatch(/"target_version":"1\.5\.0"/);
    expect(restRun.out).toMatch(/"target_count":2\b/);
    expect(fs.readdirSync(dir).filter((name) => !linked.includes(name))).toEqual(['.local']);

    const [sim] = blocks(readme, '## Devices and the simulator', '## Portal');
    const lines = sim!.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));
    // `npm start` (running already, as the text says): this test's server.
    expect(lines[0]).toMatch(/^npm start\b/);
    const simulatorLine = lines.find((l) => l.startsWith('npm run simulator'))!;
    expect(simulatorLine).not.toContain('--broker-url');
    const check = lines.slice(lines.indexOf(simulatorLine) + 1).join('\n');
    // The simulator runs until stopped: in the background, stopped by its PID.
    let out = '';
    simulator = spawn('bash', ['-euo', 'pipefail', '-c', `${keyLine}\nexec ${port(simulatorLine)}`], {
      cwd: dir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: npm does not pass Ctrl-C on by itself
    });
    simulator.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    simulator.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await expect
      .poll(() => out, { timeout: 120_000, interval: 500 })
      .toMatch(/the service sees 200 online|exit|Error|simulator:/);
    expect(out).toContain('the service sees 200 online');
    expect(out).toContain(`broker: mqtt://127.0.0.1:${server.service.mqttPort}`);
    const checked = await bash(`${keyLine}\n${port(check)}`, dir, env);
    expect(checked.code, checked.err).toBe(0);
    expect(checked.out.trim()).toBe('"total":200');
    expect(JSON.parse(fs.readFileSync(path.join(dir, '.local', 'demo-devices.json'), 'utf8'))).toHaveLength(200);
    // Ctrl-C, as a terminal sends it: to the foreground process group.
    const exited = new Promise<void>((resolve) => simulator!.on('close', () => resolve()));
    process.kill(-simulator.pid!, 'SIGINT');
    await exited;
    expect(out).toMatch(/stopping \(SIGINT\)[\s\S]*summary: connected 200\/200/);
  });
});
