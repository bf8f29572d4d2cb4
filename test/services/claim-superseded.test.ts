import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { serials } from '../helpers/factories';
import { progressPercent } from '#core/deployments/progress-rules';
import { ifStarted } from '../helpers/teardown';

/**
 * Issue 27 item 8: a claim deployment whose claim-time updates a newer deploy took over
 * (superseded) installed nothing. It must not read `completed 100 %`: it ends `superseded`
 * with progress 0, and progress only counts devices that installed the deployment's version.
 * How REST and GraphQL present a deployment is the contract suite's (test/contract).
 */
describe('a claim deployment whose updates were superseded', () => {
  let harness: ServiceHarness;
  let a: HarnessAccount;

  const upload = async (version: string) => {
    const file = await harness.services.firmware.receiveFile(a.admin, Readable.from([randomBytes(1024)]));
    await harness.services.firmware.create(a.admin, { fields: { model: 'LX-200', version }, file });
  };
  const claim = async (prefix: string, count: number) => {
    const claimed = await harness.services.claims.claim(a.admin, {
      serials: serials(prefix, count),
      model: 'LX-200',
      firmware: '1.4.2',
    });
    expect(claimed.deploymentId).not.toBeNull();
    return claimed.deploymentId!;
  };
  const deploy = (serialList: string[]) =>
    harness.services.deployments.deploy(a.admin, {
      firmwareVersion: '1.5.0',
      filter: { model: 'LX-200', firmwareLt: '1.5.0' },
      serials: serialList,
    });
  /** The deployment once the engine re-evaluated what the deploy touched. */
  const read = async (id: string) => {
    await harness.services.ota.idle();
    return harness.services.deployments.get(a.admin, { id });
  };
  const completedEvents = (id: string) =>
    harness.database
      .knex('events')
      .where({ account_id: a.accountId, type: 'deployment.completed', subject: id })
      .select<Array<{ data: { status: string } }>>('data');

  beforeAll(async () => {
    harness = await startServiceHarness();
    a = await harness.createAccount();
    await harness.services.models.register(a.admin, { name: 'LX-200', description: '' });
    await upload('1.4.2');
    await upload('1.5.0');
  }, 60_000);
  afterAll(async () => ifStarted(harness)?.close());

  it('ends superseded with progress 0 when a newer deploy took over every claim-time update', async () => {
    const claimDeployment = await claim('SUP', 2);
    const before = await read(claimDeployment);
    expect(before).toMatchObject({ kind: 'claim', status: 'running' });
    expect(progressPercent(before)).toBe(0);

    await deploy(serials('SUP', 2));
    const after = await read(claimDeployment);
    expect(after.counts).toMatchObject({ queued: 0, succeeded: 0, superseded: 2 });
    expect(after.status).toBe('superseded');
    expect(progressPercent(after)).toBe(0);
    expect(after.finishedAt).not.toBeNull();
    // The final event says so too (webhooks, the portal's live list).
    expect((await completedEvents(claimDeployment)).map((e) => e.data.status)).toEqual(['superseded']);
  });

  it('counts only the devices that installed its version: one installed, one superseded is completed 100 %', async () => {
    const claimDeployment = await claim('PART', 2);
    // PART-0001 ran the claim's firmware already (its first heartbeat): succeeded, installed.
    const [first] = await harness.database
      .knex('devices')
      .where({ account_id: a.accountId, serial: 'PART-0001' })
      .select('id');
    await harness.services.ota.onFirmwareReported([
      { accountId: a.accountId, deviceId: first.id, serial: 'PART-0001', firmware: '1.4.2', previous: null },
    ]);
    await deploy(['PART-0002']);
    const after = await read(claimDeployment);
    expect(after.counts).toMatchObject({ succeeded: 1, superseded: 1, queued: 0 });
    expect(after.status).toBe('completed');
    expect(progressPercent(after)).toBe(100);
  });
});
