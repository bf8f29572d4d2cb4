import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { claimWithCredentials, deployment, startSimulated, uploadFirmware } from './ota-helpers';
import type { SimulatedDevice } from '#simulator/simulated-device';
import { ifStarted } from '../helpers/teardown';
import { gql } from '../graphql/graphql-client';

/**
 * Upgrade paths end to end (docs/ota.md "Upgrade paths") with simulated modules: versions of
 * model UP-1 and the versions each allows to install it directly.
 * - 1.0.0: from >=0.9 <1.9 (a device on 2.0.0 cannot go straight back to it);
 * - 1.5.0: from >=1.0 <2.1 (the stepping stone, both ways);
 * - 2.0.0: from >=1.5.0 <3 (a device on 1.0.0 must pass 1.5.0).
 * A device on 0.5.0 has no path to 2.0.0.
 */
describe('upgrade paths with simulated devices', { timeout: 180_000 }, () => {
  let server: TestServer;
  let a: TestAccount;
  let running: SimulatedDevice[] = [];
  const poll = { timeout: 60_000, interval: 150 };

  beforeAll(async () => {
    server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '250', OTA_RESEND_AFTER_S: '3' } });
    a = await server.createAccount({ quota: 1000, budget: 10_000, rateLimitPerMinute: 1_000_000 });
    await buildModel(a, 'UP-1');
    const ranges: Array<[string, string]> = [
      ['1.0.0', '>=0.9 <1.9'],
      ['1.5.0', '>=1.0 <2.1'],
      ['2.0.0', '>=1.5.0 <3'],
    ];
    for (const [version, upgradeFrom] of ranges)
      await uploadFirmware(a, {
        model: 'UP-1',
        version,
        upgradeFrom,
        bytes: Buffer.alloc(20_000, version),
        expectStatus: 201,
      });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(running.map((d) => d.stop()));
    running = [];
  });
  afterAll(() => ifStarted(server)?.close());

  const sim = async (creds: Parameters<typeof startSimulated>[1], options: Parameters<typeof startSimulated>[2]) => {
    const devices = await startSimulated(server, creds, options);
    running.push(...devices);
    return devices;
  };
  const reported = async (prefix: string, n: number) =>
    expect
      .poll(
        async () =>
          (await a.api.get(`/api/v1/devices?q=${prefix}-&limit=100`)).body.devices.filter(
            (d: { firmware: string | null }) => d.firmware !== null,
          ).length,
        poll,
      )
      .toBe(n);
  // Test bodies are asserted field by field.
  const devicesOf = async (id: string): Promise<any[]> =>
    (await a.api.get(`/api/v1/firmware/deployments/${id}/devices?limit=100`)).body.devices;
  const events = async (type: string, deploymentId: string) =>
    (
      await server.service.database
        .knex('events')
        .where({ account_id: a.accountId, type })
        .whereRaw("data->>'deployment_id' = ?", [deploymentId])
        .orderBy('seq')
        .select('data')
    ).map((e: { data: Record<string, unknown> }) => e.data);

  it('shows the plan in the dry run, takes devices 1.0 -> 1.5 -> 2.0, leaves no_upgrade_path alone, rolls back through 1.5', async () => {
    const creds = await claimWithCredentials(a, { serials: serials('PA', 3), model: 'UP-1' });
    const devices = await sim(creds.slice(0, 2), { firmware: '1.0.0' });
    const stranded = await sim(creds.slice(2), { firmware: '0.5.0' });
    await reported('PA', 3);

    const request = { firmware_version: '2.0.0', filter: { model: 'UP-1', serials: serials('PA', 3) } };
    const dry = await a.api.post('/api/v1/firmware/deploy', { ...request, dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body.upgrade_paths).toEqual({
      direct: 0,
      paths: [{ from_version: '1.0.0', hops: ['1.5.0', '2.0.0'], devices: 2 }],
      no_upgrade_path: [{ from_version: '0.5.0', devices: 1 }],
      no_upgrade_path_count: 1,
    });
    const preview = await gql(
      server.service.httpUrl,
      `query($input: DeployFirmwareInput!) { deployPreview(input: $input) {
         upgradePaths { direct paths { fromVersion hops devices } noUpgradePath { fromVersion devices } noUpgradePathCount } } }`,
      {
        apiKey: a.apiKey,
        variables: { input: { firmwareVersion: '2.0.0', filter: { model: 'UP-1', serials: serials('PA', 3) } } },
      },
    );
    expect(preview.body.data.deployPreview.upgradePaths).toEqual({
      direct: 0,
      paths: [{ fromVersion: '1.0.0', hops: ['1.5.0', '2.0.0'], devices: 2 }],
      noUpgradePath: [{ fromVersion: '0.5.0', devices: 1 }],
      noUpgradePathCount: 1,
    });

    const res = await a.api.post('/api/v1/firmware/deploy', request);
    expect(res.status).toBe(202);
    const id = res.body.deployment_id as string;
    await expect.poll(async () => (await deployment(a, id)).status, poll).toBe('completed');
    expect(devices.map((d) => d.firmware)).toEqual(['2.0.0', '2.0.0']);
    expect(stranded[0]!.firmware).toBe('0.5.0');
    const done = await deployment(a, id);
    // Progress counts devices that reached the deployment's version; the stranded one did not.
    expect(done.counts).toMatchObject({ succeeded: 2, no_upgrade_path: 1, cancelled: 0, queued: 0 });
    expect(done.progress_percent).toBe(66.7);
    const rows = await devicesOf(id);
    expect(
      rows.map((r) => [r.serial, r.state, r.target_version, r.final_version, r.hop, r.hop_count, r.error]),
    ).toEqual([
      ['PA-0001', 'succeeded', '2.0.0', '2.0.0', 2, 2, null],
      ['PA-0002', 'succeeded', '2.0.0', '2.0.0', 2, 2, null],
      ['PA-0003', 'cancelled', '2.0.0', null, null, null, 'no_upgrade_path'],
    ]);
    expect(
      (await a.api.get(`/api/v1/firmware/deployments/${id}/devices?state=no_upgrade_path`)).body.devices,
    ).toHaveLength(1);
    // The stepping stone is a progress step; the update completes once, on the deployment's version.
    expect((await events('firmware.update.progress', id)).filter((e) => e.state === 'hop_succeeded')).toHaveLength(2);
    const completed = await events('firmware.update.completed', id);
    expect(completed.map((e) => e.version)).toEqual(['2.0.0', '2.0.0']);
    // Each hop was its own job: two distinct commands per device, 1.5.0 then 2.0.0.
    const sent = await server.service.database
      .knex('device_events as e')
      .join('devices as d', 'd.id', 'e.device_id')
      .where('d.serial', 'PA-0001')
      .where('e.type', 'update_step')
      .whereRaw("e.data->>'state' = 'sent'")
      .orderBy('e.id')
      .select('e.data');
    expect(sent.map((s: { data: { target_version: string } }) => s.data.target_version)).toEqual(['1.5.0', '2.0.0']);
    expect(new Set(sent.map((s: { data: { job_id: string } }) => s.data.job_id)).size).toBe(2);

    // Back to 1.0.0: its range refuses 2.0.0, so the rollback passes 1.5.0 again.
    const rb = await a.api.post(`/api/v1/firmware/deployments/${id}/rollback`);
    expect(rb.status).toBe(201);
    expect(rb.body.deployment).toMatchObject({ kind: 'rollback', target_count: 2, target_version: '1.0.0' });
    const rbId = rb.body.deployment.id as string;
    await expect.poll(async () => (await deployment(a, rbId)).status, poll).toBe('completed');
    expect(devices.map((d) => d.firmware)).toEqual(['1.0.0', '1.0.0']);
    const back = await devicesOf(rbId);
    expect(back.map((r) => [r.state, r.target_version, r.final_version, r.hop, r.hop_count])).toEqual([
      ['succeeded', '1.0.0', '1.0.0', 2, 2],
      ['succeeded', '1.0.0', '1.0.0', 2, 2],
    ]);
  });

  it('a failed hop leaves the device failed with the hop named; a retry continues from the version it is on', async () => {
    const creds = await claimWithCredentials(a, { serials: serials('PF', 1), model: 'UP-1' });
    // The module fails any update it starts while on 1.5.0 (the second hop), until told otherwise.
    const state = { failOnStone: true, device: undefined as SimulatedDevice | undefined };
    const [device] = await sim(creds, {
      firmware: '1.0.0',
      failRate: 0.5,
      random: () => (state.failOnStone && state.device?.firmware === '1.5.0' ? 0.1 : 0.9),
    });
    state.device = device;
    await reported('PF', 1);
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'UP-1', serials: ['PF-0001'] },
    });
    const id = res.body.deployment_id as string;
    await expect.poll(async () => (await deployment(a, id)).status, poll).toBe('completed_with_failures');
    expect(device!.firmware).toBe('1.5.0');
    const dep = await deployment(a, id);
    expect(dep.counts).toMatchObject({ failed: 1, succeeded: 0 });
    expect(dep.progress_percent).toBe(0);
    const [row] = await devicesOf(id);
    expect(row).toMatchObject({
      state: 'failed',
      from_version: '1.5.0',
      target_version: '2.0.0',
      final_version: '2.0.0',
      hop: 2,
      hop_count: 2,
    });
    expect((await events('firmware.update.failed', id))[0]).toMatchObject({ version: '2.0.0', from_version: '1.5.0' });

    state.failOnStone = false;
    const retry = await a.api.post(`/api/v1/firmware/deployments/${id}/retry-failed`);
    expect(retry.status).toBe(201);
    const retryId = retry.body.deployment.id as string;
    await expect.poll(async () => (await deployment(a, retryId)).status, poll).toBe('completed');
    expect(device!.firmware).toBe('2.0.0');
    // From 1.5.0 the target is one hop: not the path from 1.0.0 again.
    const [again] = await devicesOf(retryId);
    expect(again).toMatchObject({ state: 'succeeded', from_version: '1.5.0', target_version: '2.0.0', hop: null });
  });

  it('plans a device that reports its version only after the deploy when it does', async () => {
    const creds = await claimWithCredentials(a, { serials: serials('PL', 1), model: 'UP-1' });
    const request = { firmware_version: '2.0.0', filter: { model: 'UP-1', serials: ['PL-0001'] } };
    // Not connected yet: its version is unknown, so the plan waits for it.
    const dry = await a.api.post('/api/v1/firmware/deploy', { ...request, dry_run: true });
    expect(dry.body.upgrade_paths).toMatchObject({ direct: 1, paths: [], no_upgrade_path_count: 0 });
    const id = (await a.api.post('/api/v1/firmware/deploy', request)).body.deployment_id as string;
    const [device] = await sim(creds, { firmware: '1.0.0' });
    await expect.poll(async () => (await deployment(a, id)).status, poll).toBe('completed');
    expect(device!.firmware).toBe('2.0.0');
    const [row] = await devicesOf(id);
    expect(row).toMatchObject({ state: 'succeeded', target_version: '2.0.0', hop: 2, hop_count: 2 });
  });

  it('a deployment cancelled during a hop stops on the stepping stone: nothing more is sent', async () => {
    const creds = await claimWithCredentials(a, { serials: serials('PC', 1), model: 'UP-1' });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const [device] = await sim(creds, { firmware: '1.0.0', downloadGate: () => gate });
    await reported('PC', 1);
    const id = (
      await a.api.post('/api/v1/firmware/deploy', {
        firmware_version: '2.0.0',
        filter: { model: 'UP-1', serials: ['PC-0001'] },
      })
    ).body.deployment_id as string;
    await expect.poll(async () => (await devicesOf(id))[0]?.state, poll).toBe('sent');
    expect((await a.api.post(`/api/v1/firmware/deployments/${id}/cancel`)).status).toBe(200);
    release();
    await expect.poll(async () => (await deployment(a, id)).finished_at !== null, poll).toBe(true);
    expect(device!.firmware).toBe('1.5.0');
    const [row] = await devicesOf(id);
    expect(row).toMatchObject({ state: 'cancelled', target_version: '2.0.0', hop: 2, error: 'deployment cancelled' });
    expect((await deployment(a, id)).counts).toMatchObject({ succeeded: 0, cancelled: 1 });
  });
});
