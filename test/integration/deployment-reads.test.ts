import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, serials } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { explainAnalyze, rowsRead } from '../helpers/explain';
import { deploymentUpdatesQuery } from '#core/deployments/store/update-views.store';
import { queuedUpdatesMaybeHeldQuery } from '#core/deployments/store/update-locks.store';

/**
 * What an operator's views of a large deployment read: a page of its devices reads that page's
 * devices, and its held summary reads the devices that may be held, however many devices the
 * deployment has. Each is asserted on the plan of the statement the service runs.
 */
describe("a deployment's views read what they show", () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let deploymentId: string;
  let knex: TestServer['service']['database']['knex'];

  beforeAll(async () => {
    server = await startTestServer();
    knex = server.service.database.knex;
    a = await server.createAccount({ quota: 3000 });
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(b, 'LX-200');
    await uploadFirmware(a, { model: 'LX-200', version: '2.0.0', expectStatus: 201 });
    await claimDevices(a, { serials: serials('D', 1000), model: 'LX-200' });
    await claimDevices(a, { serials: serials('D', 1000, 1001), model: 'LX-200' });
    // Another account's serials sort among a's: D-0001 < D-0001.b < D-0002.
    await claimDevices(b, { serials: serials('D', 100).map((s) => `${s}.b`), model: 'LX-200' });
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', filter: { model: 'LX-200' } });
    expect(res.body.target_count).toBe(2000);
    deploymentId = res.body.deployment_id;
    await knex.raw('ANALYZE devices, device_updates, device_update_locks, sites');
  }, 180_000);
  afterAll(() => ifStarted(server)?.close());

  it("pages its devices by serial from the cursor, reading only that page's devices", async () => {
    const first = await a.api.get(`/api/v1/firmware/deployments/${deploymentId}/devices?limit=10`);
    const second = await a.api.get(
      `/api/v1/firmware/deployments/${deploymentId}/devices?limit=10&cursor=${first.body.next_cursor}`,
    );
    const serialsOf = (body: { devices: Array<{ serial: string }> }) => body.devices.map((d) => d.serial);
    expect(serialsOf(first.body)).toEqual(serials('D', 10));
    expect(serialsOf(second.body)).toEqual(serials('D', 10, 11));

    const page = deploymentUpdatesQuery(knex, {
      accountId: a.accountId,
      deploymentId,
      afterSerial: 'D-1000',
      limit: 11,
    }).toSQL();
    const plan = await explainAnalyze(knex, page.sql, page.bindings);
    expect({ devices: rowsRead(plan, 'devices'), updates: rowsRead(plan, 'device_updates') }).toEqual({
      devices: 11,
      updates: 11,
    });
  });

  it('counts its held updates from the devices that may be held, not from its 2,000 updates', async () => {
    const held = () =>
      explainAnalyze(
        knex,
        ...(Object.values(
          queuedUpdatesMaybeHeldQuery({ accountId: a.accountId, deploymentIds: [deploymentId], now: new Date() }),
        ) as [string, []]),
      );
    expect(rowsRead(await held(), 'device_updates')).toBe(0);

    const locked = await knex('devices').where({ serial: 'D-1500' }).first('id');
    await knex('device_update_locks').insert({
      device_id: locked.id,
      account_id: a.accountId,
      until: new Date(Date.now() + 3_600_000),
      reason: 'occupied',
    });
    // Another account's lock is not a's to count, nor to read.
    const theirs = await knex('devices').where({ serial: 'D-0001.b' }).first('id');
    await knex('device_update_locks').insert({
      device_id: theirs.id,
      account_id: b.accountId,
      until: new Date(Date.now() + 3_600_000),
      reason: 'occupied',
    });
    expect(rowsRead(await held(), 'device_updates')).toBe(1);
    const view = await a.api.get(`/api/v1/firmware/deployments/${deploymentId}`);
    expect(view.body.deployment.held).toEqual({ count: 1, reasons: { occupied: 1 }, serials: ['D-1500'] });
  });
});
