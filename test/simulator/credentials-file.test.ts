import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCredentials, saveCredentials } from '#simulator/fleet';

/** The simulator's credentials file, where the README puts it: a folder a fresh clone lacks. */
describe('simulator credentials file', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sim-creds-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is saved into a folder that does not exist yet (the claim already happened), readable by its owner only', async () => {
    const file = path.join(dir, '.local', 'demo-devices.json');
    const creds = [{ serial: 'DEMO-000001', username: 'DEMO-000001', password: 'p4ssw0rd-of-the-device' }];
    await saveCredentials(file, creds);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(await loadCredentials(file)).toEqual(creds);
  });
});
