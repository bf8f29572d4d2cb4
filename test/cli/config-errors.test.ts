import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it, expect, afterAll } from 'vitest';

/** `npm start`'s entry point with `env`, until it exits: its exit code, stdout and stderr. */
function runService(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('api/src/main.ts')], {
      env: {
        ...process.env,
        HOST: '127.0.0.1',
        PORT: '0',
        MQTT_PORT: '0',
        LOG_LEVEL: 'info',
        DEMO_ACCOUNT: 'false',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Issue 27 item 6: a configuration error is one line on stderr that names the variable, its
 * value (secrets masked) and what is allowed; no log line, no stack trace; exit code 1.
 */
describe('configuration errors at start', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it(
    'prints one plain line per bad setting and exits 1, the DATABASE_URL password masked',
    { timeout: 120_000 },
    async () => {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'fleet-config-errors-'));
      dirs.push(dataDir);
      const cases: Array<[Record<string, string>, string]> = [
        [{ PORT: 'abc' }, 'PORT=abc: expected a port number from 0 to 65535 (0 = any free port)'],
        [{ HOST: '999.1.1.1' }, 'HOST=999.1.1.1: expected an IP address or host name of this machine'],
        [{ DATABASE_URL: 'not-a-url' }, 'DATABASE_URL=not-a-url: expected a PostgreSQL URL: postgres://'],
        // A well-formed URL nothing answers on: refused before knex logs anything.
        [
          { DATABASE_URL: 'postgres://fleet:hunter2@127.0.0.1:1/fleet' },
          'DATABASE_URL=postgres://fleet:***@127.0.0.1:1/fleet: cannot connect (connect ECONNREFUSED 127.0.0.1:1)',
        ],
      ];
      for (const [env, expected] of cases) {
        const { code, stdout, stderr } = await runService({ DATA_DIR: dataDir, ...env });
        expect(code, stderr).toBe(1);
        const lines = stderr.trimEnd().split('\n');
        expect(lines, stderr).toHaveLength(1);
        expect(lines[0]).toContain(`fleet service failed to start: ${expected}`);
        expect(stdout + stderr).not.toMatch(/"level":|\n\s+at |hunter2/);
        expect(stdout).toBe('');
      }
    },
  );
});
