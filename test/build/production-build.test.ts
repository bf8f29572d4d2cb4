import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../helpers/test-database';

/**
 * The production artifact as docs/production.md installs it: `npm run build` into a folder of its
 * own, `npm ci --omit=dev` there, the service started with plain Node (no tsx, no TypeScript) on
 * free ports, its readiness and the portal's first page fetched, a stop by PID, then the compiled
 * CLI on the same database. On TEST_DATABASE_URL the artifact runs on a fresh PostgreSQL database;
 * otherwise on a fresh embedded one (the migrations run from the bundle either way). It runs on
 * whatever Node runs the suite: .ci/run runs it on Node 26 (embedded) and Node 24 (PostgreSQL).
 *
 * The install needs the npm cache (offline first) or the registry; without either the test says
 * so and is skipped. What CI cannot check here (systemd, a container image) is listed in
 * docs/production.md; the second test holds those files to the artifact's layout.
 */
const root = path.resolve(import.meta.dirname, '../..');

interface Ran {
  code: number | null;
  output: string;
  ms: number;
}

/** A command to its end, its output kept (the last 20,000 characters). */
function runCommand(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: 'pipe' });
    let output = '';
    const keep = (d: Buffer) => (output = (output + d.toString()).slice(-20_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output, ms: Date.now() - started });
    });
  });
}

/** The environment a production process gets: none of the test run's own variables. */
function productionEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!/^(VITEST|NODE_ENV$|TEST_|FLEET_TEST_|DATABASE_URL$|DATA_DIR$|PORT$|MQTT_PORT$)/.test(key)) env[key] = value;
  return { ...env, NODE_ENV: 'production', ...extra };
}

/** An npm failure that says the packages could not be fetched (no cache entry, no registry). */
const NO_PACKAGES = /ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|network/i;

describe('the production build', { tags: ['slow'] }, () => {
  let work = '';
  let artifact = '';
  let built: Ran;
  let service: ChildProcess | undefined;
  let db: TestDatabase | undefined;

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-build-'));
    artifact = path.join(work, 'fleet');
    built = await runCommand('npm', ['run', 'build', '--', '--out', artifact], {
      cwd: root,
      env: productionEnv({}),
      timeoutMs: 300_000,
    });
    console.log(`[production build] npm run build: ${(built.ms / 1000).toFixed(1)} s`);
  }, 320_000);

  afterAll(async () => {
    if (service?.exitCode === null && service.signalCode === null) service.kill('SIGKILL');
    await db?.drop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('installs with npm ci --omit=dev, serves /readyz and the portal on plain Node, stops on SIGTERM, and its CLI works', async (ctx) => {
    expect(built.code, built.output).toBe(0);

    // Offline from the npm cache first (CI's `npm ci` filled it); the registry for what it lacks.
    let installed = await runCommand('npm', ['ci', '--omit=dev', '--offline', '--no-audit', '--no-fund'], {
      cwd: artifact,
      env: productionEnv({}),
      timeoutMs: 300_000,
    });
    if (installed.code !== 0 && NO_PACKAGES.test(installed.output))
      installed = await runCommand('npm', ['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], {
        cwd: artifact,
        env: productionEnv({}),
        timeoutMs: 300_000,
      });
    if (installed.code !== 0 && NO_PACKAGES.test(installed.output)) {
      console.log(`[production build] skipped: npm could not fetch the runtime packages\n${installed.output}`);
      ctx.skip('npm ci --omit=dev could not fetch packages: no npm cache and no registry here');
    }
    expect(installed.code, installed.output).toBe(0);
    console.log(`[production build] npm ci --omit=dev: ${(installed.ms / 1000).toFixed(1)} s`);
    // A production install: nothing that runs TypeScript or builds anything.
    for (const tool of ['tsx', 'typescript', 'vite', 'vitest', 'esbuild'])
      expect(fs.existsSync(path.join(artifact, 'node_modules', tool)), `${tool} installed`).toBe(false);

    // A fresh database: the artifact migrates it itself.
    if (usingPostgres()) db = await createTestDatabase();
    const dataDir = fs.mkdtempSync(path.join(work, 'data-'));
    const env = productionEnv({
      PORT: '0',
      MQTT_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      ...(db?.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
    });
    const started = Date.now();
    const child = spawn(process.execPath, ['--enable-source-maps', 'server/main.js'], {
      cwd: artifact,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    service = child;
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));

    // The banner prints the bound address once every listener is up (PORT=0: any free port).
    let httpUrl: string | undefined;
    while (!httpUrl) {
      if (child.exitCode !== null) throw new Error(`the service exited (${child.exitCode}):\n${output}`);
      if (Date.now() - started > 60_000) throw new Error(`the service printed no address within 60 s:\n${output}`);
      httpUrl = /HTTPS? \([^)]*\): (http:\/\/\S+)/.exec(output)?.[1];
      if (!httpUrl) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    console.log(`[production build] started in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const ready = await fetch(`${httpUrl}/readyz`);
    expect(ready.status, output).toBe(200);
    expect(((await ready.json()) as { status: string }).status).toBe('ready');

    const page = await fetch(`${httpUrl}/`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    const html = await page.text();
    expect(html).toContain('<title>Fleet portal</title>');
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script, html).toBeDefined();
    const asset = await fetch(`${httpUrl}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toMatch(/javascript/);

    // Stopped by its PID, as systemd or a container runtime stops it.
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    process.kill(child.pid!, 'SIGTERM');
    expect(await exited, output).toBe(0);

    // The compiled CLI on the same database (the embedded one is free once the service stopped).
    const fleet = (args: string[]) =>
      runCommand(process.execPath, ['bin/fleet.js', ...args], { cwd: artifact, env, timeoutMs: 60_000 });
    const created = await fleet([
      'account',
      'create',
      '--name',
      'Built Lighting',
      '--quota',
      '10',
      '--budget',
      '100',
      '--currency',
      'EUR',
      '--unit-price',
      '1',
      '--admin-email',
      'ops@built.example',
      '--admin-password',
      'a-long-enough-password',
    ]);
    expect(created.code, created.output).toBe(0);
    const listed = await fleet(['account', 'list', '--json']);
    expect(listed.code, listed.output).toBe(0);
    const { accounts } = JSON.parse(listed.output) as { accounts: Array<{ name: string }> };
    expect(accounts.map((a) => a.name)).toContain('Built Lighting');
  });

  it('is what the systemd unit and the Dockerfile start', () => {
    expect(built.code, built.output).toBe(0);
    // deploy/fleet.service runs the artifact from /opt/fleet.
    const unit = fs.readFileSync(path.join(root, 'deploy', 'fleet.service'), 'utf8');
    const execStart = /^ExecStart=(.+)$/m.exec(unit)?.[1]?.trim().split(/\s+/) ?? [];
    const workingDirectory = /^WorkingDirectory=(.+)$/m.exec(unit)?.[1]?.trim();
    expect(workingDirectory).toBe('/opt/fleet');
    const unitEntry = execStart.find((arg) => arg.endsWith('.js'));
    expect(unitEntry).toBeDefined();
    expect(fs.existsSync(path.join(artifact, path.relative('/opt/fleet', unitEntry!)))).toBe(true);
    // The Dockerfile copies the artifact to its WORKDIR and starts CMD there.
    const dockerfile = fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    const cmd = /^CMD (\[.+\])$/m.exec(dockerfile)?.[1];
    expect(cmd).toBeDefined();
    const dockerEntry = (JSON.parse(cmd!) as string[]).find((arg) => arg.endsWith('.js'));
    expect(dockerEntry).toBeDefined();
    expect(fs.existsSync(path.join(artifact, dockerEntry!))).toBe(true);
    expect(dockerfile).toMatch(/^RUN npm run build$/m);
    expect(dockerfile).toMatch(/^RUN npm ci --omit=dev/m);
    expect(dockerfile).toMatch(/^USER node$/m);
  });
});
