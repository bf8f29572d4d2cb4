import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { collect, connectDevice, heartbeat } from '../helpers/mqtt';
import { gql } from '../graphql/graphql-client';
import { topics } from '#protocol/topics';
import { claimWithCredentials, uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';

type Creds = { serial: string; username: string; password: string };

/**
 * Why updates failed, in a vocabulary dashboards can group by: the `error_code` of a failure
 * report is stored with the device's update, counted per deployment (REST and GraphQL), and sent
 * with the failure webhook. A code the service does not know is recorded as `other` and counted;
 * it never costs the device its report.
 */
describe('OTA error codes of failed updates', { timeout: 120_000 }, () => {
  let server: TestServer;
  let a: TestAccount;
  const clients: MqttClient[] = [];
  const poll = { timeout: 20_000, interval: 50 };

  beforeAll(async () => {
    server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '3600' } });
    a = await server.createAccount({ quota: 100, budget: 10_000 });
    await buildModel(a, 'LX-200');
    for (const v of ['1.0.0', '2.0.0'])
      await uploadFirmware(a, { model: 'LX-200', version: v, bytes: Buffer.alloc(1500, v), expectStatus: 201 });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await ifStarted(server)?.close();
  });

  const unknownCodes = async () =>
    (await server.service.metrics.otaUnknownErrorCodes.get()).values.reduce((sum, v) => sum + v.value, 0);

  it('stores the reported code with the update, counts failures per code, and records an unknown code as other', async () => {
    const serials = ['EC-1', 'EC-2', 'EC-3', 'EC-4', 'EC-5'];
    const creds = (await claimWithCredentials(a, { serials, model: 'LX-200' })) as Creds[];
    const commands = new Map<string, { job_id: string; model: string }>();
    for (const c of creds) {
      const client = await connectDevice(server.service.mqttUrl!, c);
      clients.push(client);
      const seen = collect(client);
      client.on('message', () => {
        const command = seen.find((m) => m.topic === topics.ota(c.serial));
        if (command) commands.set(c.serial, JSON.parse(command.payload) as { job_id: string; model: string });
      });
      await client.subscribeAsync(topics.ota(c.serial), { qos: 1 });
      await client.publishAsync(topics.heartbeat(c.serial), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      await expect.poll(async () => (await a.api.get(`/api/v1/devices/${c.serial}`)).body.firmware, poll).toBe('1.0.0');
    }
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', serials });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.deployment_id as string;
    await expect.poll(() => commands.size, poll).toBe(serials.length);
    // The command names the model the image is for.
    expect([...commands.values()].map((c) => c.model)).toEqual(serials.map(() => 'LX-200'));
    const before = await unknownCodes();

    const reports: Array<Record<string, unknown>> = [
      { state: 'failed', error: 'sha256 mismatch', error_code: 'digest_mismatch' },
      { state: 'failed', error: 'sha256 mismatch again', error_code: 'digest_mismatch' },
      // A newer module's code: recorded as `other`, the report still counts.
      { state: 'failed', error: 'brown-out during erase', error_code: 'brownout' },
      // No code at all (firmware written before the vocabulary).
      { state: 'failed', error: 'failed' },
      { state: 'rolled_back', error: 'watchdog reset 3 times', error_code: 'boot_failed' },
    ];
    for (const [i, c] of creds.entries()) {
      const client = clients[i]!;
      const job = commands.get(c.serial)!.job_id;
      await client.publishAsync(topics.otaProgress(c.serial), JSON.stringify({ job_id: job, ...reports[i] }), {
        qos: 1,
      });
    }
    const rest = async () =>
      (await a.api.get(`/api/v1/firmware/deployments/${id}`)).body.deployment as {
        counts: Record<string, number>;
        failure_codes: Array<{ code: string | null; count: number }>;
      };
    const finished = async () => {
      const { counts } = await rest();
      return (counts.failed ?? 0) + (counts.rolled_back ?? 0);
    };
    await expect.poll(finished, poll).toBe(5);
    expect((await rest()).failure_codes).toEqual([
      { code: 'digest_mismatch', count: 2 },
      { code: 'boot_failed', count: 1 },
      { code: 'other', count: 1 },
      { code: null, count: 1 },
    ]);
    const devices = (await a.api.get(`/api/v1/firmware/deployments/${id}/devices?limit=100`)).body.devices as Array<{
      serial: string;
      state: string;
      error: string;
      error_code: string | null;
    }>;
    expect(devices.map((d) => [d.serial, d.state, d.error_code])).toEqual([
      ['EC-1', 'failed', 'digest_mismatch'],
      ['EC-2', 'failed', 'digest_mismatch'],
      ['EC-3', 'failed', 'other'],
      ['EC-4', 'failed', null],
      ['EC-5', 'rolled_back', 'boot_failed'],
    ]);
    expect(devices[2]!.error).toBe('brown-out during erase');
    expect(await unknownCodes()).toBe(before + 1);

    const graph = await gql(
      server.service.httpUrl,
      `query ($id: ID!) { deployment(id: $id) { failureCodes { code count } updates(first: 10, state: failed) { edges { node { serial errorCode } } } } }`,
      { apiKey: a.apiKey, variables: { id } },
    );
    expect(graph.body.errors).toBeUndefined();
    expect(graph.body.data.deployment.failureCodes).toEqual((await rest()).failure_codes);
    expect(
      graph.body.data.deployment.updates.edges.map((e: { node: { serial: string; errorCode: string | null } }) => [
        e.node.serial,
        e.node.errorCode,
      ]),
    ).toEqual([
      ['EC-1', 'digest_mismatch'],
      ['EC-2', 'digest_mismatch'],
      ['EC-3', 'other'],
      ['EC-4', null],
    ]);

    // The failure event (webhooks, GraphQL subscriptions) carries the code too.
    const events = await server.service.database
      .knex('events')
      .where({ type: 'firmware.update.failed', subject: 'EC-1' })
      .select('data');
    expect(events.map((e: { data: { error_code: string } }) => e.data.error_code)).toEqual(['digest_mismatch']);
  });
});
