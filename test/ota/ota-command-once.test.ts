import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';
import { claimWithCredentials, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';

type Creds = { serial: string; username: string; password: string };

/**
 * A device that comes online with a queued update gets its command once. It used to get it twice
 * within milliseconds, both with dup=0: once when its `ota` subscription was in place (the queued
 * update dispatched) and once more when its first heartbeat arrived (the re-send of an unanswered
 * `sent` command, which did not know the command had just gone out on this very connection).
 */
describe(
  'OTA: one command per connection for a device that comes online with a queued update',
  { timeout: 120_000 },
  () => {
    let server: TestServer;
    let a: TestAccount;
    const clients: MqttClient[] = [];
    const poll = { timeout: 20_000, interval: 25 };

    beforeAll(async () => {
      server = await startTestServer({
        // No sweep: only what a connection sets off sends a command here.
        env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '3600' },
      });
      a = await server.createAccount({ quota: 100, budget: 10_000 });
      await buildModel(a, 'LX-200');
      for (const v of ['1.0.0', '2.0.0'])
        await uploadFirmware(a, { model: 'LX-200', version: v, bytes: Buffer.alloc(1500, v), expectStatus: 201 });
    }, 60_000);
    afterAll(async () => {
      await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
      await ifStarted(server)?.close();
    });

    const ota = () => server.service.services.ota;
    const connect = async (c: Creds) => {
      const client = await connectDevice(server.service.mqttUrl!, c);
      clients.push(client);
      const commands: Array<{ job_id: string; model: string; dup: boolean }> = [];
      client.on('message', (topic, payload, packet) => {
        if (topic === topics.ota(c.serial))
          commands.push({ ...(JSON.parse(payload.toString()) as { job_id: string; model: string }), dup: packet.dup });
      });
      return { client, commands };
    };

    it('sends the queued command once, whether the first heartbeat comes before or after it (repeated)', async () => {
      const serials = ['ONCE-1', 'ONCE-2', 'ONCE-3', 'ONCE-4', 'ONCE-5', 'ONCE-6'];
      const creds = (await claimWithCredentials(a, { serials, model: 'LX-200', firmware: '1.0.0' })) as Creds[];
      // Each device has been heard once (so the service knows what it runs), then goes away.
      for (const c of creds) {
        const { client } = await connect(c);
        await client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
        await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
        await expect
          .poll(async () => (await a.api.get(`/api/v1/devices/${c.serial}`)).body.firmware, poll)
          .toBe('1.0.0');
        await client.endAsync();
      }
      // All of them offline: the deployment queues every update (none goes out before they are back).
      for (const c of creds)
        await expect
          .poll(async () => (await a.api.get(`/api/v1/devices/${c.serial}`)).body.status, poll)
          .toBe('offline');
      await ota().idle();
      const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', serials });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      await ota().idle();
      const updates = (await a.api.get(`/api/v1/firmware/deployments/${res.body.deployment_id}/devices?limit=100`)).body
        .devices as Array<{ state: string }>;
      expect(updates.map((u) => u.state)).toEqual(creds.map(() => 'queued'));

      const counts: number[] = [];
      for (const [i, c] of creds.entries()) {
        const dev = await connect(c);
        await dev.client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
        // Half of them heartbeat at once, the others once the command is there.
        if (i % 2 === 1) await expect.poll(() => dev.commands.length, poll).toBeGreaterThan(0);
        await dev.client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
        await expect.poll(() => dev.commands.length, poll).toBeGreaterThan(0);
        await ota().idle();
        // Time for a second copy to arrive.
        await new Promise((r) => setTimeout(r, 500));
        await ota().idle();
        counts.push(dev.commands.length);
        expect(dev.commands[0]).toMatchObject({ model: 'LX-200', dup: false });
      }
      expect(counts).toEqual(creds.map(() => 1));
    });
  },
);
