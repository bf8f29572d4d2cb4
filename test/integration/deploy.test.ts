import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, serials, setReported } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';

/**
 * POST /firmware/deploy and the deployments API without devices connected: targeting, dry run,
 * superseding, concurrency, claim-time firmware, reading and the operator's actions. The engine
 * that moves updates is tested end to end in test/ota/.
 */
describe('deploy and deployments', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let knex: TestServer['service']['database']['knex'];

  beforeAll(async () => {
    server = await startTestServer();
    knex = server.service.database.knex;
    a = await server.createAccount({ quota: 5000, budget: 100_000 });
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(a, 'LX-300');
    await buildModel(b, 'LX-200');
    for (const v of ['1.9.0', '1.10.0', '2.0.0'])
      await uploadFirmware(a, { model: 'LX-200', version: v, expectStatus: 201 });
    await uploadFirmware(a, { model: 'LX-300', version: '1.10.0', expectStatus: 201 });
    await claimDevices(a, { serials: serials('N', 30), model: 'LX-200' });
    await claimDevices(a, { serials: serials('M', 5), model: 'LX-300' });
    await claimDevices(b, { serials: serials('B', 3), model: 'LX-200' });
    // N-0001..10 run 1.9.0, N-0011..20 run 1.10.0, N-0021..25 run 1.2.0, N-0026..30 never reported.
    await setReported(knex, { accountId: a.accountId, serials: serials('N', 10), state: { firmware: '1.9.0' } });
    await setReported(knex, { accountId: a.accountId, serials: serials('N', 10, 11), state: { firmware: '1.10.0' } });
    await setReported(knex, { accountId: a.accountId, serials: serials('N', 5, 21), state: { firmware: '1.2.0' } });
  }, 60_000);
  afterAll(() => ifStarted(server)?.close());

  it('dry run counts targets with firmware_lt compared as versions (1.9.0 < 1.10.0, never text) and writes nothing', async () => {
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200', firmware_lt: '1.10.0' },
      dry_run: true,
    });
    expect(res.status).toBe(200);
    // 1.9.0 and 1.2.0 are older than 1.10.0; text order would also have put 1.10.0 devices below "1.9".
    expect(res.body).toMatchObject({ dry_run: true, target_count: 15, model: 'LX-200', target_version: '2.0.0' });
    expect(res.body.sample_serials).toHaveLength(10);
    expect(res.body.sample_serials[0]).toBe('N-0001');
    const list = await a.api.get('/api/v1/firmware/deployments');
    expect(list.body.deployments).toEqual([]);
    const lt = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200', firmware_lt: '1.9.10' },
      dry_run: true,
    });
    expect(lt.body.target_count).toBe(15);
  });

  it('deploy answers 202 with id, count, status and status URL; targets exclude devices already on the version', async () => {
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '1.10.0',
      filter: { model: 'LX-200' },
    });
    expect(res.status).toBe(202);
    // 30 devices minus the 10 on 1.10.0 (never-reported devices are not on it).
    expect(res.body).toMatchObject({
      target_count: 20,
      status: 'running',
      status_url: `/api/v1/firmware/deployments/${res.body.deployment_id}`,
    });
    const detail = await a.api.get(res.body.status_url);
    expect(detail.status).toBe(200);
    expect(detail.body.deployment).toMatchObject({
      kind: 'deploy',
      model: 'LX-200',
      target_version: '1.10.0',
      target_count: 20,
      status: 'running',
    });
    expect(detail.body.deployment.counts).toMatchObject({ queued: 20, sent: 0, succeeded: 0, superseded: 0 });
    const page1 = await a.api.get(`${res.body.status_url}/devices?limit=15`);
    expect(page1.body.devices).toHaveLength(15);
    expect(page1.body.devices[0]).toMatchObject({
      serial: 'N-0001',
      state: 'queued',
      from_version: '1.9.0',
      target_version: '1.10.0',
    });
    const page2 = await a.api.get(`${res.body.status_url}/devices?limit=15&cursor=${page1.body.next_cursor}`);
    expect(page2.body.devices).toHaveLength(5);
    expect(page2.body.next_cursor).toBeNull();
    const history = await a.api.get('/api/v1/devices/N-0001/history');
    expect(history.body.events?.[0] ?? history.body.history?.[0]).toBeDefined();
  });

  it("a newer deployment supersedes the older one's queued updates, and the older one records it", async () => {
    const older = (await a.api.get('/api/v1/firmware/deployments')).body.deployments[0];
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      serials: ['N-0001', 'N-0002'],
      filter: { model: 'LX-200' },
    });
    expect(res.status).toBe(202);
    expect(res.body.target_count).toBe(2);
    const old = await a.api.get(`/api/v1/firmware/deployments/${older.id}`);
    expect(old.body.deployment.counts).toMatchObject({ queued: 18, superseded: 2 });
    const sup = await a.api.get(`/api/v1/firmware/deployments/${older.id}/devices?state=superseded`);
    expect(sup.body.devices.map((d: { serial: string }) => d.serial)).toEqual(['N-0001', 'N-0002']);
    expect(sup.body.devices[0]).toMatchObject({ state: 'cancelled', superseded_by: res.body.deployment_id });
    const active = await knex.raw(
      `SELECT device_id, count(*)::int AS n FROM device_updates WHERE state IN ('queued','sent','downloading','installing','rebooting') GROUP BY 1 HAVING count(*) > 1`,
    );
    expect(active.rows).toEqual([]);
  });

  it('concurrent deploys over the same devices leave exactly one unfinished update per device', async () => {
    const results = await Promise.all(
      ['1.10.0', '2.0.0', '1.10.0', '2.0.0'].map((v) =>
        a.api.post('/api/v1/firmware/deploy', {
          firmware_version: v,
          filter: { model: 'LX-200', firmware_lt: '1.10.0' },
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual([202, 202, 202, 202]);
    const active = (
      await knex.raw(
        `SELECT count(*)::int AS n, count(DISTINCT device_id)::int AS d FROM device_updates u JOIN devices x ON x.id = u.device_id WHERE x.account_id = ? AND u.state = 'queued'`,
        [a.accountId],
      )
    ).rows[0];
    expect(active.n).toBe(active.d);
    expect(active.n).toBe(20);
  });

  it('validates: unknown version 422, unknown model 422, invalid serials 422, both serial forms 422, viewer 403', async () => {
    const missing = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '9.0.0',
      filter: { model: 'LX-200' },
    });
    expect([missing.status, missing.body.code]).toEqual([422, 'version_not_found']);
    const model = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', filter: { model: 'NOPE' } });
    expect([model.status, model.body.code]).toEqual([422, 'unknown_model']);
    const ambiguous = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '1.10.0' });
    expect(ambiguous.status).toBe(422);
    const bad = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      serials: ['ok-1', 'bad serial'],
    });
    expect([bad.status, bad.body.code]).toEqual([422, 'invalid_serial']);
    const both = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      serials: ['N-0001'],
      filter: { serials: ['N-0002'] },
    });
    expect(both.status).toBe(422);
    const rollout = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      rollout: { batches: [50, 10, 100] },
    });
    expect(rollout.status).toBe(422);
    const lt = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { firmware_lt: 'abc' },
    });
    expect([lt.status, lt.body.code]).toEqual([422, 'invalid_version']);
    const key = await a.api.post('/api/v1/api-keys', { name: 'ro', role: 'viewer' });
    const viewer = a.api.withKey(key.body.secret);
    expect((await viewer.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0' })).status).toBe(403);
    expect((await viewer.get('/api/v1/firmware/deployments')).status).toBe(200);
  });

  it('another account sees none of it: versions, deployments and actions answer 404; its serials are never targeted', async () => {
    const mine = (await a.api.get('/api/v1/firmware/deployments')).body.deployments[0];
    expect((await b.api.get(`/api/v1/firmware/deployments/${mine.id}`)).status).toBe(404);
    expect((await b.api.get(`/api/v1/firmware/deployments/${mine.id}/devices`)).status).toBe(404);
    expect((await b.api.post(`/api/v1/firmware/deployments/${mine.id}/cancel`)).status).toBe(404);
    expect((await b.api.get('/api/v1/firmware/deployments')).body.deployments).toEqual([]);
    const cross = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      serials: ['B-0001'],
      filter: { model: 'LX-200' },
      dry_run: true,
    });
    expect(cross.body.target_count).toBe(0);
  });

  it('pause, resume and cancel move the deployment; acting on a finished one is 409', async () => {
    const dep = (
      await a.api.post('/api/v1/firmware/deploy', { firmware_version: '1.10.0', filter: { model: 'LX-300' } })
    ).body;
    expect(dep.target_count).toBe(5);
    const paused = await a.api.post(`/api/v1/firmware/deployments/${dep.deployment_id}/pause`);
    expect(paused.body.deployment).toMatchObject({ status: 'paused', paused_reason: 'paused_by_user' });
    expect((await a.api.post(`/api/v1/firmware/deployments/${dep.deployment_id}/pause`)).status).toBe(409);
    const resumed = await a.api.post(`/api/v1/firmware/deployments/${dep.deployment_id}/resume`);
    expect(resumed.body.deployment.status).toBe('running');
    const cancelled = await a.api.post(`/api/v1/firmware/deployments/${dep.deployment_id}/cancel`);
    expect(cancelled.body.deployment).toMatchObject({ status: 'cancelled' });
    expect(cancelled.body.deployment.counts).toMatchObject({ queued: 0, cancelled: 5 });
    const late = await a.api.post(`/api/v1/firmware/deployments/${dep.deployment_id}/resume`);
    expect(late.status, JSON.stringify(late.body)).toBe(409);
    // Nothing was installed, so there is nothing to roll back.
    expect((await a.api.post(`/api/v1/firmware/deployments/${dep.deployment_id}/rollback`)).status).toBe(409);
    const history = await knex('device_events')
      .where({ account_id: a.accountId, type: 'update_step' })
      .whereRaw("data->>'deployment_id' = ?", [dep.deployment_id])
      .select('data');
    expect(history.map((h: { data: { state: string } }) => h.data.state).sort()).toEqual([
      ...Array(5).fill('cancelled'),
      ...Array(5).fill('queued'),
    ]);
  });

  it('claiming with firmware schedules it through a deployment of kind claim', async () => {
    const claim = await claimDevices(a, { serials: serials('C', 3), model: 'LX-200', firmware: '2.0.0' });
    expect(claim.deployment_id).toMatch(/^[0-9a-f-]{36}$/);
    const dep = await a.api.get(`/api/v1/firmware/deployments/${claim.deployment_id}`);
    expect(dep.body.deployment).toMatchObject({
      kind: 'claim',
      target_version: '2.0.0',
      target_count: 3,
      status: 'running',
    });
    expect(dep.body.deployment.counts.queued).toBe(3);
    const device = await a.api.get('/api/v1/devices/C-0001');
    expect(device.body.update ?? device.body.device?.update).toMatchObject({
      state: 'queued',
      target_version: '2.0.0',
    });
  });

  it('a firmware binary cannot be deleted while unfinished updates target it (409)', async () => {
    const v = (await a.api.get('/api/v1/firmware/versions?model=LX-200')).body.versions.find(
      (x: { version: string }) => x.version === '2.0.0',
    );
    const res = await a.api.delete(`/api/v1/firmware/versions/${v.id}`);
    expect([res.status, res.body.code]).toEqual([409, 'invalid_state']);
    expect((await a.api.get(`/api/v1/firmware/versions/${v.id}`)).body.firmware_version.file_available).toBe(true);
  });

  it('lists deployments newest first with paging', async () => {
    const p1 = await a.api.get('/api/v1/firmware/deployments?limit=3');
    expect(p1.body.deployments).toHaveLength(3);
    expect(p1.body.deployments[0].kind).toBe('claim');
    const p2 = await a.api.get(`/api/v1/firmware/deployments?limit=3&cursor=${p1.body.next_cursor}`);
    const listed: Array<{ id: string }> = [...p1.body.deployments, ...p2.body.deployments];
    expect(new Set(listed.map((d) => d.id)).size).toBe(listed.length);
    expect((await a.api.get('/api/v1/firmware/deployments?cursor=garbage')).status).toBe(422);
  });
});
