import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { claimWithCredentials, deployment, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';

/**
 * A finished deployment shows what it finished with, kept when it finished rather than counted
 * over all its updates at every view: an unclaimed device leaves its device list but not its
 * figures, and the health gate's verdicts after the finish still count.
 */
describe("a finished deployment's figures", { timeout: 120_000 }, () => {
  let server: TestServer;
  let a: TestAccount;

  beforeAll(async () => {
    server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '3600' } });
    a = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    await buildModel(a, 'LX-200');
    await uploadFirmware(a, { model: 'LX-200', version: '2.0.0', bytes: Buffer.alloc(2000, 2), expectStatus: 201 });
  }, 60_000);
  afterAll(async () => ifStarted(server)?.close());

  const ota = () => server.service.services.ota;
  const knex = () => server.service.database.knex;
  const deviceId = async (serial: string): Promise<string> => {
    const device = await knex()('devices').where({ serial }).first('id');
    return device.id;
  };

  it('keeps its counts when a device is unclaimed, and counts later health failures', async () => {
    const serials = ['FIG-1', 'FIG-2', 'FIG-3', 'FIG-4'];
    await claimWithCredentials(a, { serials, model: 'LX-200' });
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200' },
      serials,
      rollout: { health_max_reconnects: 1 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.deployment_id as string;
    await ota().idle();
    // FIG-4's update failed (as its report would have left it); the others say they run the
    // target already, so theirs complete as already installed and the deployment finishes.
    await knex()('device_updates')
      .where({ device_id: await deviceId('FIG-4') })
      .update({ state: 'failed', error: 'flash write failed', error_code: 'flash_write', finished_at: new Date() });
    await ota().onFirmwareReported(
      await Promise.all(
        serials.slice(0, 3).map(async (serial) => ({
          accountId: a.accountId,
          deviceId: await deviceId(serial),
          serial,
          firmware: '2.0.0',
          previous: '1.0.0',
        })),
      ),
    );
    await ota().idle();
    // Unclaimed before the deployment was ever viewed: what it finished with was kept when it finished.
    for (const serial of ['FIG-3', 'FIG-4']) expect((await a.api.delete(`/api/v1/devices/${serial}`)).status).toBe(204);
    await ota().idle();
    const devices = (await a.api.get(`/api/v1/firmware/deployments/${id}/devices?limit=100`)).body.devices as Array<{
      serial: string;
    }>;
    expect(devices.map((d) => d.serial).sort()).toEqual(['FIG-1', 'FIG-2']);
    const finished = await deployment(a, id);
    expect(finished.status).toBe('completed_with_failures');
    expect(finished.counts).toMatchObject({ succeeded: 3, failed: 1, health_failed: 0 });
    expect(finished.failure_codes).toEqual([{ code: 'flash_write', count: 1 }]);

    // FIG-1 reconnects twice soon after its update (the deployment allows one): a health failure.
    const fig1 = await deviceId('FIG-1');
    for (let i = 0; i < 2; i++) {
      await ota().onDeviceReady({ accountId: a.accountId, deviceId: fig1, serial: 'FIG-1' });
      await ota().idle();
    }
    const after = await deployment(a, id);
    expect(after.counts).toMatchObject({ succeeded: 3, health_failed: 1 });
    const listed = (await a.api.get('/api/v1/firmware/deployments?limit=100')).body.deployments as Array<{
      id: string;
      counts: unknown;
    }>;
    expect(listed.find((d) => d.id === id)!.counts).toEqual(after.counts);
  });

  it('keeps the counts of a cancelled deployment from the moment it finished', async () => {
    await claimWithCredentials(a, { serials: ['CAN-1', 'CAN-2'], model: 'LX-200' });
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200' },
      serials: ['CAN-1', 'CAN-2'],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.deployment_id as string;
    await ota().idle();
    // Nothing was in flight: the cancel finishes it at once.
    expect((await a.api.post(`/api/v1/firmware/deployments/${id}/cancel`)).status).toBe(200);
    expect((await a.api.delete('/api/v1/devices/CAN-2')).status).toBe(204);
    await ota().idle();
    const cancelled = await deployment(a, id);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.counts).toMatchObject({ cancelled: 2, queued: 0 });
  });

  it('keeps the figures of a deployment that finished before figures were kept, at its first view', async () => {
    await claimWithCredentials(a, { serials: ['OLD-1'], model: 'LX-200' });
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200' },
      serials: ['OLD-1'],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.deployment_id as string;
    await ota().onFirmwareReported([
      {
        accountId: a.accountId,
        deviceId: await deviceId('OLD-1'),
        serial: 'OLD-1',
        firmware: '2.0.0',
        previous: '1.0.0',
      },
    ]);
    await ota().idle();
    // As the upgrade leaves a deployment that finished before it.
    await knex()('deployment_outcomes').where({ deployment_id: id }).delete();
    expect((await deployment(a, id)).counts).toMatchObject({ succeeded: 1 });
    expect(await knex()('deployment_outcomes').where({ deployment_id: id }).first('counts')).toMatchObject({
      counts: { succeeded: 1 },
    });
    expect((await a.api.delete('/api/v1/devices/OLD-1')).status).toBe(204);
    expect((await deployment(a, id)).counts).toMatchObject({ succeeded: 1 });
  });
});
