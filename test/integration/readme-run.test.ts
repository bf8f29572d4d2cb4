import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch } from 'undici';
import { freePort } from '../helpers/haproxy';
import { angleBracketPlaceholders, readmeBlocks, type ReadmeBlock } from '../helpers/readme-script';
import { usingPostgres } from '../helpers/test-database';

const root = path.resolve(__dirname, '../..');
const TOOLS = ['bash', 'curl', 'grep', 'jq', 'openssl', 'mosquitto_pub', 'mosquitto_sub'];
const missing = TOOLS.filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
if (missing.length) console.log(`README run skipped: ${missing.join(', ')} not found`);

/** A process in a terminal of its own: its output, and Ctrl-C to its whole process group. */
class Terminal {
  output = '';
  private readonly child: ChildProcess;
  private readonly closed: Promise<number | null>;

  constructor(command: string, cwd: string, env: NodeJS.ProcessEnv) {
    // npm, its shell and node: one process group (detached), as a terminal's foreground job.
    this.child = spawn('bash', ['-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const keep = (d: Buffer) => (this.output = (this.output + d.toString()).slice(-200_000));
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.closed = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async waitFor(pattern: RegExp, timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!pattern.test(this.output)) {
      if (!this.running) throw new Error(`exited before ${pattern}:\n${this.output}`);
      if (Date.now() > until) throw new Error(`no ${pattern} within ${timeoutMs} ms:\n${this.output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Ctrl-C, as a terminal sends it; SIGKILL if that has not ended it in 20 s. */
  async interrupt(): Promise<number | null> {
    if (!this.running) return this.child.exitCode;
    process.kill(-this.child.pid!, 'SIGINT');
    const timer = setTimeout(() => this.kill(), 20_000);
    const code = await this.closed;
    clearTimeout(timer);
    return code;
  }

  kill(): void {
    try {
      if (this.running) process.kill(-this.child.pid!, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

/**
 * The README, every shell block in order, as a newcomer pastes it: on a fresh working folder
 * (the repository's files linked in, no data/ and no .local/), in one shell whose variables
 * carry from block to block, with `npm start` and the simulator in terminals of their own, the
 * service stopped and started where a block's first line says so. Substituted: the `$KEY`
 * placeholder line (with the key the first start printed) and the ports the README names
 * (8080, 8443, 8883: free ones here, as tests run beside each other). Port 1883 is played by a
 * port this test holds (FLEET_DEFAULT_MQTT_PORT), so the first start finds "1883" taken.
 */
// The README starts the embedded default whatever TEST_DATABASE_URL says: the PostgreSQL run of the
// suite would repeat this file's run on the embedded database, so it runs in the embedded run only.
describe.skipIf(missing.length > 0 || usingPostgres())('README, run in order as pasted', () => {
  // Made in beforeAll, not while collecting: a skipped suite runs no hooks, so folders made
  // here would never be removed.
  const linked = fs.readdirSync(root).filter((name) => !['.local', 'data', '.git', 'dist'].includes(name));
  let dir = '';
  let stateDir = '';
  let shellState = '';
  const terminals: Terminal[] = [];
  let held: net.Server | undefined;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-run-'));
    stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-run-shell-'));
    shellState = path.join(stateDir, 'exported.sh');
    for (const name of linked) fs.symlinkSync(path.join(root, name), path.join(dir, name));
  });
  afterAll(() => {
    for (const terminal of terminals) terminal.kill();
    held?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
  });

  it('every block does what its text says', { timeout: 420_000 }, async () => {
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    const blocks = readmeBlocks(readme);
    // Every block below has its assertions: a new block must get its own.
    expect(blocks.map((b) => b.section)).toEqual([
      'Quick start',
      'Quick start',
      'REST API',
      'Devices and the simulator',
      'Production: TLS, device certificates, signed firmware',
      'Production: TLS, device certificates, signed firmware',
      'Production: TLS, device certificates, signed firmware',
      'Operator tool: `fleet`',
    ]);
    expect(blocks.flatMap((b) => angleBracketPlaceholders(b.text))).toEqual([]);
    expect(blocks.slice(2).map((b) => b.need)).toEqual([
      'running',
      'running',
      'stopped',
      'running',
      'running',
      'stopped',
    ]);

    held = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => held!.listen(0, '127.0.0.1', resolve));
    const taken = (held.address() as net.AddressInfo).port;
    const ports = { '8080': await freePort(), '8443': await freePort(), '8883': await freePort() };
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TMPDIR: process.env.TMPDIR,
      LANG: process.env.LANG ?? 'C.UTF-8',
      // What this machine plays: 1883 taken, and the README's ports free.
      FLEET_DEFAULT_MQTT_PORT: String(taken),
      PORT: String(ports['8080']),
      MQTTS_PORT: String(ports['8883']),
    };
    const withPorts = (text: string) => text.replace(/\b(8080|8443|8883)\b/g, (p) => String(ports[p as '8080']));

    let service: Terminal | undefined;
    let simulator: Terminal | undefined;
    let key = '';
    const shell = (script: string) =>
      new Promise<{ code: number; out: string; err: string }>((resolve) => {
        const full = `set -a\n[ -f ${shellState} ] && source ${shellState}\n${withPorts(script)}\nexport -p | grep -v '^declare -[a-zA-Z]*r' > ${shellState}\n`;
        execFile('bash', ['-euo', 'pipefail', '-c', full], { cwd: dir, env, timeout: 180_000 }, (error, out, err) =>
          resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
        );
      });
    const background = (line: string) => {
      const terminal = new Terminal(`[ -f ${shellState} ] && source ${shellState}\n${withPorts(line)}`, dir, env);
      terminals.push(terminal);
      return terminal;
    };

    /** Runs one block; returns what its shell lines printed. */
    const run = async (block: ReadmeBlock): Promise<string> => {
      if (block.need === 'running') expect(service?.running, `${block.section}: the service runs`).toBe(true);
      if (block.need === 'stopped') {
        if (simulator?.running) {
          await simulator.interrupt();
          expect(simulator.output).toMatch(/stopping \(SIGINT\)[\s\S]*summary: connected 200\/200/);
        }
        if (service?.running) await service.interrupt();
        expect(service?.running).toBe(false);
      }
      let printed = '';
      for (const step of block.steps) {
        if (step.kind === 'skipped') continue;
        if (step.kind === 'service') {
          expect(service?.running ?? false, 'a second `npm start` while one runs').toBe(false);
          service = background(step.line);
          // the banner is one write: the demo key, when there is one, comes with this line
          await service.waitFor(/OpenAPI: \S+\n/, 120_000);
        } else if (step.kind === 'simulator') {
          expect(step.line).not.toContain('--broker-url'); // the service names its broker
          simulator = background(step.line);
          await simulator.waitFor(/the service sees \d+ online|simulator:/, 150_000);
        } else {
          const script = step.script.replace(/^export KEY=flk_\.\.\.(?= +# placeholder)/m, `export KEY=${key}`);
          const result = await shell(script);
          expect(result.code, `${block.section}:\n${script}\n${result.out}\n${result.err}`).toBe(0);
          printed += result.out;
        }
      }
      return printed;
    };

    // The shell and `npm start` run on this test's Node (CI runs the suite on Node 24 and on 26).
    expect((await shell('node -v')).out.trim()).toBe(process.version);

    // Quick start: `npm start` on a fresh folder, 1883 taken; the install and test commands are CI's.
    const [quick, placeholder, rest, devices, tls, certificates, signing, operator] = blocks as [
      ReadmeBlock,
      ...ReadmeBlock[],
    ];
    expect(quick.steps.map((s) => s.kind)).toEqual(['skipped', 'service', 'skipped']);
    await run(quick);
    expect(service!.output).toContain(`!! MQTT: port ${taken} was taken (another broker?)`);
    const mqttUrl = /MQTT for devices: (mqtt:\/\/\S+)/.exec(service!.output)![1]!;
    key = /admin API key \(shown once\): (flk_\S+)/.exec(service!.output)![1]!;
    expect(placeholder!.text.trim()).toMatch(/^export KEY=flk_\.\.\. +# placeholder/);
    await run(placeholder!);

    const api = async (pathname: string, ca?: string) => {
      const base = ca ? `https://localhost:${ports['8443']}` : `http://localhost:${ports['8080']}`;
      const dispatcher = ca ? new Agent({ connect: { ca } }) : undefined;
      const res = await fetch(`${base}${pathname}`, { headers: { authorization: `Bearer ${key}` }, dispatcher });
      return (await res.json()) as Record<string, any>;
    };

    const restOut = await run(rest!);
    expect(restOut).not.toContain('"code"'); // no problem+json answer anywhere
    expect([...restOut.matchAll(/ HTTP (\d+)/g)].map((m) => m[1])).toEqual(['201', '201']);
    expect(restOut).toContain('"name":"LX-200"');
    expect(restOut).toContain('"total":2');
    expect(restOut).toMatch(/"target_version":"1\.5\.0"/);
    expect(restOut).toMatch(/"target_count":2\b/);
    const lx = await api('/api/v1/devices?model=LX-200');
    expect(lx.devices.map((d: { serial: string }) => d.serial)).toEqual(['LX200-000001', 'LX200-000002']);

    const devicesOut = await run(devices!);
    expect(simulator!.output).toContain('the service sees 200 online');
    expect(simulator!.output).toMatch(new RegExp(`broker: mqtt://[^ ]+:${new URL(mqttUrl).port} `));
    expect(devicesOut.trim()).toBe('"total":200');
    expect(JSON.parse(fs.readFileSync(path.join(dir, '.local', 'demo-devices.json'), 'utf8'))).toHaveLength(200);

    const tlsOut = await run(tls!);
    expect(service!.output).toMatch(/HTTPS \(portal, REST/);
    expect(tlsOut).toContain('{"status":"ok"}');
    expect(JSON.parse(tlsOut.slice(tlsOut.indexOf('{"version"')))).toMatchObject({ version: expect.any(Number) });
    const ca = fs.readFileSync(path.join(dir, '.local', 'ca.pem'), 'utf8');

    await run(certificates!);
    expect(fs.readFileSync(path.join(dir, '.local', 'device-ca.pem'), 'utf8')).toMatch(
      /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n?$/,
    );
    await expect.poll(async () => (await api('/api/v1/devices/LX200-000001', ca)).firmware).toBe('1.0.0');
    const issued = (await api('/api/v1/devices/LX200-000001/certificates', ca)).certificates;
    expect(issued).toHaveLength(1);
    expect(issued[0].revoked_at).not.toBeNull();

    const signedOut = await run(signing!);
    const keyId = (await api('/api/v1/firmware/signing-key', ca)).signing_key.key_id as string;
    expect(JSON.parse(signedOut.slice(signedOut.lastIndexOf('{\n')))).toEqual({
      version: '1.2.0',
      signed: true,
      key_id: keyId,
    });

    const operatorOut = await run(operator!);
    expect(service!.running).toBe(false);
    expect(operatorOut).toMatch(/"account_id":"[^"]+"[\s\S]*"api_key":"flk_/);
    expect(operatorOut).toContain('Acme Lighting');
    expect(operatorOut).toMatch(/User viewer@acme\.example \(viewer\) created/);
    expect(operatorOut).toMatch(/Key [-0-9a-f]{36}: 6000 requests per minute\.\nKey [-0-9a-f]{36}: 100 requests/);
    expect(operatorOut).toContain('Migrations are up to date.');

    // What the blocks made: the data folder and .local/, both ignored by git.
    expect(
      fs
        .readdirSync(dir)
        .filter((name) => !linked.includes(name))
        .sort(),
    ).toEqual(['.local', 'data']);
    const ignored = spawnSync('git', ['check-ignore', '--no-index', '.local/ca.key', 'data/ports.json'], { cwd: root });
    expect(ignored.stdout.toString().trim().split('\n')).toEqual(['.local/ca.key', 'data/ports.json']);
  });
});
