import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { ifStarted } from '../helpers/teardown';

/**
 * Configuration versions of a serial only ever go up, also across an unclaim and a new claim: a
 * module that keeps the version it applied last must see the new owner's first configuration as
 * a new one (docs/device-protocol.md "Configuration"). Nothing of the previous owner is carried
 * over but that number.
 */
describe('configuration versions per serial', () => {
  let harness: ServiceHarness;

  beforeAll(async () => {
    harness = await startServiceHarness();
  });
  afterAll(async () => ifStarted(harness)?.close());

  const account = async () => {
    const acc = await harness.createAccount();
    await harness.services.models.register(acc.admin, { name: 'LX-200', description: '' });
    return acc;
  };
  const claim = (acc: HarnessAccount, serials: string[]) =>
    harness.services.claims.claim(acc.admin, { serials, model: 'LX-200' });
  const configure = (acc: HarnessAccount, serial: string, config: Record<string, unknown>) =>
    harness.services.devices.update(acc.admin, { serial, patch: { config } });

  it('keeps increasing after an unclaim and a claim by another account, which gets nothing else of the old owner', async () => {
    const first = await account();
    await claim(first, ['CV-1']);
    expect((await harness.services.devices.get(first.admin, { serial: 'CV-1' })).config.desiredVersion).toBe(1);
    expect((await configure(first, 'CV-1', { dim_level: 40 })).config.desiredVersion).toBe(2);
    expect((await configure(first, 'CV-1', { dim_level: 41, timezone: 'Europe/Berlin' })).config.desiredVersion).toBe(
      3,
    );
    await harness.services.devices.unclaim(first.admin, { serial: 'CV-1' });

    const second = await account();
    await claim(second, ['CV-1']);
    const reclaimed = await harness.services.devices.get(second.admin, { serial: 'CV-1' });
    expect(reclaimed.config.desiredVersion).toBeGreaterThan(3);
    // The new owner starts from the defaults, not from the previous owner's settings.
    expect(reclaimed.config.desired).toEqual({
      heartbeat_interval_s: 60,
      dim_level: 100,
      power_on_level: 100,
      timezone: 'UTC',
      maintenance_window: null,
    });
    const configured = await configure(second, 'CV-1', { dim_level: 10 });
    expect(configured.config.desiredVersion).toBe(reclaimed.config.desiredVersion + 1);

    // Back to the first account: still higher than anything the serial was ever sent.
    await harness.services.devices.unclaim(second.admin, { serial: 'CV-1' });
    await claim(first, ['CV-1']);
    expect((await harness.services.devices.get(first.admin, { serial: 'CV-1' })).config.desiredVersion).toBeGreaterThan(
      configured.config.desiredVersion,
    );
  });

  it('a serial never claimed before starts at version 1, each serial of a bulk claim from its own mark', async () => {
    const acc = await account();
    await claim(acc, ['CV-10']);
    await configure(acc, 'CV-10', { dim_level: 5 });
    await configure(acc, 'CV-10', { dim_level: 6 });
    await harness.services.devices.unclaim(acc.admin, { serial: 'CV-10' });
    await claim(acc, ['CV-10', 'CV-11']);
    const versions = await Promise.all(
      ['CV-10', 'CV-11'].map(
        async (serial) => (await harness.services.devices.get(acc.admin, { serial })).config.desiredVersion,
      ),
    );
    expect(versions).toEqual([4, 1]);
  });
});
