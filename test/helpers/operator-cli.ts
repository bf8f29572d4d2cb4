import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';

export interface CliAccount {
  api_key: string;
  api_key_id: string;
}

/**
 * Runs the operator tool (`bin/fleet.js`) as an operator would, against the database in `env`.
 * On the embedded database it opens the data folder itself, so it runs before the service does.
 */
export async function runFleetCli(env: Record<string, string>, args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [path.resolve('bin/fleet.js'), ...args], {
    env: { ...process.env, ...env },
  });
  return stdout;
}

/**
 * An account created with the operator tool, its API key allowed `perMinute` requests when given
 * (the default rate limit would slow the tests that drive many requests).
 */
export async function createAccountWithCli(
  env: Record<string, string>,
  input: { name: string; quota: number; budget: number; perMinute?: number },
): Promise<CliAccount> {
  const slug = input.name.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  const stdout = await runFleetCli(env, [
    'account',
    'create',
    '--name',
    input.name,
    '--quota',
    String(input.quota),
    '--budget',
    String(input.budget),
    '--currency',
    'EUR',
    '--unit-price',
    '1',
    '--admin-email',
    `${slug}-${Date.now()}@example.test`,
    '--admin-password',
    'correct horse battery',
    '--json',
  ]);
  const account = JSON.parse(stdout) as CliAccount;
  if (input.perMinute !== undefined) {
    await runFleetCli(env, [
      'api-key',
      'rate-limit',
      '--key',
      account.api_key_id,
      '--per-minute',
      String(input.perMinute),
    ]);
  }
  return account;
}
