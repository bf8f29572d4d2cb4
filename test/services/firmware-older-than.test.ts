import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { setReported } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';

/**
 * One rule for "older than" (`firmware_lt`) in the device list, deploy dry runs and deploys
 * (docs/ota.md "Targets", docs/rest-devices.md): a device that has not reported counts as running
 * the firmware its claim named; one of unknown version (claimed without a firmware, nothing
 * reported) never matches `firmware_lt`, and is a target of a deploy without it.
 */
describe('firmware_lt: one rule for lists, dry runs and deploys', () => {
  let harness: ServiceHarness;
  let account: HarnessAccount;

  const upload = async (version: string) => {
    const file = await harness.services.firmware.receiveFile(account.admin, Readable.from([randomBytes(1024)]));
    await harness.services.firmware.create(account.admin, { fields: { model: 'LX-200', version }, file });
  };
  const listed = async (firmwareLt: string) =>
    (await harness.services.devices.list(account.admin, { filter: { firmwareLt }, limit: 100 })).devices.map(
      (d) => d.serial,
    );
  const previewed = async (filter: { firmwareLt?: string }) => {
    const preview = await harness.services.deployments.preview(account.admin, { firmwareVersion: '1.5.0', filter });
    return [...preview.sampleSerials].sort();
  };

  beforeAll(async () => {
    harness = await startServiceHarness();
    account = await harness.createAccount();
    await harness.services.models.register(account.admin, { name: 'LX-200', description: '' });
    for (const version of ['1.0.0', '1.5.0']) await upload(version);
    // CLAIMED-ON-1.0: its claim names 1.0.0, it has not reported. UNKNOWN: no firmware at all.
    await harness.services.claims.claim(account.admin, {
      serials: ['CLAIMED-ON-1.0'],
      model: 'LX-200',
      firmware: '1.0.0',
    });
    await harness.services.claims.claim(account.admin, {
      serials: ['UNKNOWN', 'REPORTS-1.2', 'REPORTS-1.5'],
      model: 'LX-200',
    });
    await setReported(harness.database.knex, {
      accountId: account.accountId,
      serials: ['REPORTS-1.2'],
      state: { firmware: '1.2.0' },
    });
    await setReported(harness.database.knex, {
      accountId: account.accountId,
      serials: ['REPORTS-1.5'],
      state: { firmware: '1.5.0' },
    });
  }, 60_000);
  afterAll(async () => ifStarted(harness)?.close());

  it('the device list matches the claimed firmware until a report, and never a device of unknown version', async () => {
    expect(await listed('1.1.0')).toEqual(['CLAIMED-ON-1.0']);
    expect(await listed('2.0.0')).toEqual(['CLAIMED-ON-1.0', 'REPORTS-1.2', 'REPORTS-1.5']);
  });

  it('a dry run with firmware_lt targets the same devices the list shows, less those already on the version', async () => {
    expect(await previewed({ firmwareLt: '2.0.0' })).toEqual(['CLAIMED-ON-1.0', 'REPORTS-1.2']);
    expect(await previewed({ firmwareLt: '1.1.0' })).toEqual(['CLAIMED-ON-1.0']);
  });

  it('a dry run without firmware_lt also targets the device of unknown version', async () => {
    expect(await previewed({})).toEqual(['CLAIMED-ON-1.0', 'REPORTS-1.2', 'UNKNOWN']);
  });

  it('a deploy targets exactly what its dry run showed', async () => {
    const filter = { firmwareLt: '2.0.0' };
    const expected = await previewed(filter);
    const deployment = await harness.services.deployments.deploy(account.admin, { firmwareVersion: '1.5.0', filter });
    const targets = await harness.services.deployments.devices(account.admin, { id: deployment.id, limit: 100 });
    expect(targets.devices.map((d) => d.serial).sort()).toEqual(expected);
  });
});
