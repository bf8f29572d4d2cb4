import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { collect, connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { ManualClock } from '#core/shared/clock';
import { claimWithCredentials, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';

type Creds = { serial: string; username: string; password: string };

/**
 * Site windows in a real deployment (docs/ota.md "Maintenance windows"): by default a device of a
 * site with a window gets its command only inside the site's local window; an explicit
 * `respect_maintenance_window: false` sends at once; a device's own window overrides its site's.
 */
describe('site maintenance windows in deployments (manual clock)', { timeout: 90_000 }, () => {
  // 2026-03-08 is the spring-forward night in New York: 02:00 EST -> 03:00 EDT at 07:00Z.
  const clock = new ManualClock('2026-03-08T04:00:00Z'); // 23:00 EST on the 7th
  let server: TestServer;
  let a: TestAccount;
  const clients: MqttClient[] = [];
  const poll = { timeout: 30_000, interval: 50 };

  beforeAll(async () => {
    server = await startTestServer({ clock, env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '3600' } });
    a = await server.createAccount({ quota: 100, budget: 10_000 });
    await buildModel(a, 'LX-200');
    for (const v of ['1.0.0', '2.0.0'])
      await uploadFirmware(a, { model: 'LX-200', version: v, bytes: Buffer.alloc(1500, v), expectStatus: 201 });
    const site = await a.api.post('/api/v1/sites', {
      name: 'NYC office',
      time_zone: 'America/New_York',
      // Starts in the hour that does not exist tonight: opens at 03:00 EDT (07:00Z).
      maintenance_window: { start: '02:30', end: '05:00' },
    });
    expect(site.status, JSON.stringify(site.body)).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  const ota = () => server.service.services.ota;
  const connect = async (c: Creds) => {
    const client = await connectDevice(server.service.mqttUrl!, c);
    clients.push(client);
    const seen = collect(client);
    await client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
    await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
    await expect.poll(async () => (await a.api.get(`/api/v1/devices/${c.serial}`)).body.firmware, poll).toBe('1.0.0');
    return { client, commands: () => seen.filter((m) => m.topic === topics.ota(c.serial)) };
  };
  const stateOf = async (deploymentId: string, serial: string) =>
    (await a.api.get(`/api/v1/firmware/deployments/${deploymentId}/devices?limit=100`)).body.devices.find(
      (d: { serial: string }) => d.serial === serial,
    )?.state as string;
  const deploy = async (serials: string[], extra: Record<string, unknown> = {}) => {
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200', serials },
      ...extra,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    await ota().idle();
    return res.body.deployment_id as string;
  };

  it('holds a site device outside the window by default, sends it when the window opens; false sends at once', async () => {
    // Claimed straight into the site (batch claim `site`).
    const claim = { serials: ['NYC-1', 'NYC-2', 'NYC-OWN'], model: 'LX-200', site: 'NYC office' };
    const creds = (await claimWithCredentials(a, claim)) as Creds[];
    // NYC-OWN has a window of its own (22:00-23:30 in its configured zone): it overrides the site's.
    const own = await a.api.patch('/api/v1/devices/NYC-OWN', {
      config: { timezone: 'America/New_York', maintenance_window: { start: '22:00', end: '23:30' } },
    });
    expect(own.status, JSON.stringify(own.body)).toBe(200);
    const [one, two, ownDev] = await Promise.all(creds.map((c) => connect(c)));

    const windowed = await deploy(['NYC-1', 'NYC-OWN']);
    const forced = await deploy(['NYC-2'], { respect_maintenance_window: false });
    expect(
      (await a.api.get(`/api/v1/firmware/deployments/${windowed}`)).body.deployment.respect_maintenance_window,
    ).toBe(true);
    // 23:00 EST: inside NYC-OWN's own window, outside the site's.
    await expect.poll(() => ownDev!.commands().length, poll).toBe(1);
    await expect.poll(() => two!.commands().length, poll).toBe(1);
    await ota().runNow();
    expect(one!.commands()).toHaveLength(0);
    expect(await stateOf(windowed, 'NYC-1')).toBe('queued');
    expect(await stateOf(forced, 'NYC-2')).toBe('sent');

    clock.set('2026-03-08T06:59:00Z'); // 01:59 EST: the window has not opened
    await ota().runNow();
    expect(one!.commands()).toHaveLength(0);
    clock.set('2026-03-08T07:00:00Z'); // 03:00 EDT: the first valid time after 02:30
    await ota().runNow();
    await expect.poll(() => one!.commands().length, poll).toBe(1);
    expect(await stateOf(windowed, 'NYC-1')).toBe('sent');
  });
});
