import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, claimDevices } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { gql } from '../graphql/graphql-client';
import { ifStarted } from '../helpers/teardown';

/**
 * Sites over REST and GraphQL (docs/ota.md "Sites"): CRUD with validation, tenant isolation,
 * device assignment (PATCH, claim), the device-list filter, the deploy filter and the fleet
 * summary per site.
 */
describe('sites', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let berlinId: string;
  let austinId: string;
  let foreignId: string;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await buildModel(b, 'LX-200');
    await claimDevices(a, { serials: ['ST-1', 'ST-2', 'ST-3'], model: 'LX-200' });
    await uploadFirmware(a, { model: 'LX-200', version: '2.0.0', bytes: Buffer.alloc(500, 2), expectStatus: 201 });
    const foreign = await b.api.post('/api/v1/sites', { name: 'Foreign', time_zone: 'UTC' });
    expect(foreign.status).toBe(201);
    foreignId = foreign.body.site.id;
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it('creates, reads, patches, lists and deletes a site', async () => {
    const created = await a.api.post('/api/v1/sites', {
      name: 'Berlin HQ',
      time_zone: 'europe/berlin',
      address: 'Alexanderplatz 1',
      customer_ref: 'C-42',
      maintenance_window: { start: '01:00', end: '04:00' },
      freezes: [{ from: '2026-12-24T08:00', to: '2026-12-27T08:00', reason: 'holidays' }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.site).toMatchObject({
      name: 'Berlin HQ',
      time_zone: 'Europe/Berlin',
      address: 'Alexanderplatz 1',
      customer_ref: 'C-42',
      maintenance_window: { start: '01:00', end: '04:00' },
      freezes: [{ from: '2026-12-24T08:00', to: '2026-12-27T08:00', reason: 'holidays' }],
      device_count: 0,
    });
    berlinId = created.body.site.id;
    const austin = await a.api.post('/api/v1/sites', { name: 'Austin plant', time_zone: 'America/Chicago' });
    expect(austin.status).toBe(201);
    expect(austin.body.site).toMatchObject({ address: null, maintenance_window: null, freezes: [] });
    austinId = austin.body.site.id;

    expect((await a.api.get(`/api/v1/sites/${berlinId}`)).body.site.name).toBe('Berlin HQ');
    const patched = await a.api.patch(`/api/v1/sites/${austinId}`, {
      maintenance_window: { start: '22:00', end: '02:00' },
      address: 'Main St 5',
    });
    expect(patched.status).toBe(200);
    expect(patched.body.site).toMatchObject({
      name: 'Austin plant',
      maintenance_window: { start: '22:00', end: '02:00' },
    });
    const cleared = await a.api.patch(`/api/v1/sites/${austinId}`, { address: null });
    expect(cleared.body.site.address).toBeNull();
    expect(cleared.body.site.maintenance_window).toEqual({ start: '22:00', end: '02:00' });

    const tmp = await a.api.post('/api/v1/sites', { name: 'Zz temporary', time_zone: 'Asia/Tokyo' });
    const page1 = await a.api.get('/api/v1/sites?limit=2');
    expect(page1.body.total).toBe(3);
    expect(page1.body.sites.map((s: { name: string }) => s.name)).toEqual(['Austin plant', 'Berlin HQ']);
    const page2 = await a.api.get(`/api/v1/sites?limit=2&cursor=${page1.body.next_cursor}`);
    expect(page2.status, JSON.stringify(page2.body)).toBe(200);
    expect(page2.body.sites.map((s: { name: string }) => s.name)).toEqual(['Zz temporary']);
    expect(page2.body.next_cursor).toBeNull();
    expect((await a.api.get('/api/v1/sites?q=berlin')).body.sites).toHaveLength(1);
    expect((await a.api.delete(`/api/v1/sites/${tmp.body.site.id}`)).status).toBe(204);
    expect((await a.api.get(`/api/v1/sites/${tmp.body.site.id}`)).status).toBe(404);
  });

  it.each([
    [{ name: 'X', time_zone: 'Mars/Olympus' }, 'time_zone'],
    [{ name: 'X', time_zone: '+01:00' }, 'time_zone'],
    [{ name: 'X', time_zone: 'UTC', maintenance_window: { start: '25:00', end: '04:00' } }, 'maintenance_window.start'],
    [{ name: 'X', time_zone: 'UTC', maintenance_window: { start: '04:00', end: '04:00' } }, 'maintenance_window'],
    [
      { name: 'X', time_zone: 'UTC', freezes: [{ from: '2026-02-30T08:00', to: '2026-03-01T08:00' }] },
      'freezes.0.from',
    ],
    [{ name: 'X', time_zone: 'UTC', freezes: [{ from: '2026-03-02T08:00', to: '2026-03-01T08:00' }] }, 'freezes.0.to'],
    [
      { name: 'X', time_zone: 'UTC', freezes: [{ from: '2026-03-01T08:00+01:00', to: '2026-03-02T08:00' }] },
      'freezes.0.from',
    ],
    [{ name: randomUUID(), time_zone: 'UTC' }, 'name'],
    [{ name: '  ', time_zone: 'UTC' }, 'name'],
  ])('refuses %j naming %s', async (body, field) => {
    const res = await a.api.post('/api/v1/sites', body);
    expect(res.status).toBe(422);
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('refuses a second site of the same name, ignoring case (409)', async () => {
    const res = await a.api.post('/api/v1/sites', { name: 'berlin hq', time_zone: 'UTC' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('already_exists');
    const renamed = await a.api.patch(`/api/v1/sites/${austinId}`, { name: 'BERLIN HQ' });
    expect(renamed.status).toBe(409);
  });

  it("answers 404 for another account's site on every route, and never assigns it", async () => {
    for (const res of [
      await a.api.get(`/api/v1/sites/${foreignId}`),
      await a.api.patch(`/api/v1/sites/${foreignId}`, { name: 'Mine' }),
      await a.api.delete(`/api/v1/sites/${foreignId}`),
      await a.api.patch('/api/v1/devices/ST-1', { site: foreignId }),
      await a.api.patch('/api/v1/devices/ST-1', { site: 'Foreign' }),
      await a.api.post('/api/v1/devices/claim', { serials: ['ST-X'], model: 'LX-200', site: foreignId }),
      await a.api.post('/api/v1/firmware/deploy', {
        firmware_version: '2.0.0',
        filter: { site: foreignId },
        dry_run: true,
      }),
    ]) {
      expect(res.status, JSON.stringify(res.body)).toBe(404);
    }
    expect((await a.api.get('/api/v1/sites')).body.sites.map((s: { id: string }) => s.id)).not.toContain(foreignId);
    expect((await a.api.get('/api/v1/devices/ST-1')).body.site).toBeNull();
    expect((await a.api.get('/api/v1/devices/ST-X')).status).toBe(404);
    expect((await b.api.get(`/api/v1/sites/${foreignId}`)).body.site.name).toBe('Foreign');
  });

  it('assigns devices by PATCH (id or name) and claim, lists and filters by site, and unassigns', async () => {
    const byId = await a.api.patch('/api/v1/devices/ST-1', { site: berlinId });
    expect(byId.status, JSON.stringify(byId.body)).toBe(200);
    expect(byId.body.site).toEqual({ id: berlinId, name: 'Berlin HQ' });
    expect((await a.api.patch('/api/v1/devices/ST-2', { site: 'berlin hq' })).body.site.id).toBe(berlinId);
    const claimed = await claimDevices(a, {
      serials: ['ST-4', 'ST-5'],
      model: 'LX-200',
      site: 'Austin plant',
    } as never);
    expect(claimed.devices.map((d: { site: unknown }) => d.site)).toEqual([
      { id: austinId, name: 'Austin plant' },
      { id: austinId, name: 'Austin plant' },
    ]);
    const history = await a.api.get('/api/v1/devices/ST-1/history');
    expect(history.body.events[0]).toMatchObject({ type: 'site_changed', data: { to: { id: berlinId } } });

    const serialsOf = (res: { body: { devices: Array<{ serial: string }> } }) => res.body.devices.map((d) => d.serial);
    expect(serialsOf(await a.api.get(`/api/v1/devices?site=${berlinId}&limit=10`))).toEqual(['ST-1', 'ST-2']);
    // The streamed list renders each device in SQL: the site must be there too.
    const streamed = await a.api.get('/api/v1/devices?site=Austin%20plant');
    expect(streamed.body.devices).toHaveLength(2);
    expect(streamed.body.devices[0].site).toEqual({ id: austinId, name: 'Austin plant' });
    expect(serialsOf(await a.api.get('/api/v1/devices?site=Nowhere&limit=10'))).toEqual([]);
    expect((await a.api.get(`/api/v1/sites/${berlinId}`)).body.site.device_count).toBe(2);

    const unassigned = await a.api.patch('/api/v1/devices/ST-2', { site: null });
    expect(unassigned.body.site).toBeNull();
    expect(serialsOf(await a.api.get(`/api/v1/devices?site=${berlinId}&limit=10`))).toEqual(['ST-1']);
  });

  it('limits a deploy to a site (filter.site) and records it', async () => {
    const dry = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { site: 'Austin plant' },
      dry_run: true,
    });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body.target_count).toBe(2);
    expect(dry.body.sample_serials).toEqual(['ST-4', 'ST-5']);
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', filter: { site: austinId } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const dep = await a.api.get(`/api/v1/firmware/deployments/${res.body.deployment_id}`);
    expect(dep.body.deployment).toMatchObject({ target_count: 2, respect_maintenance_window: true });
    expect(dep.body.deployment.filter.site).toBe(austinId);
  });

  it('deleting a site unassigns its devices', async () => {
    const site = await a.api.post('/api/v1/sites', { name: 'Short lived', time_zone: 'UTC' });
    await a.api.patch('/api/v1/devices/ST-3', { site: site.body.site.id });
    expect((await a.api.delete(`/api/v1/sites/${site.body.site.id}`)).status).toBe(204);
    expect((await a.api.get('/api/v1/devices/ST-3')).body.site).toBeNull();
  });

  it('GraphQL: sites, site, create/update/delete, device site, filter and fleet summary per site', async () => {
    const url = server.service.httpUrl;
    const opts = (variables: Record<string, unknown> = {}) => ({ apiKey: a.apiKey, variables });
    const created = await gql(
      url,
      `mutation($input: CreateSiteInput!) { createSite(input: $input) { id name timeZone maintenanceWindow { start end } freezes { from to reason } } }`,
      opts({
        input: {
          name: 'Kolkata office',
          timeZone: 'Asia/Kolkata',
          maintenanceWindow: { start: '02:00', end: '05:00' },
          freezes: [{ from: '2026-08-15T00:00', to: '2026-08-16T00:00', reason: null }],
        },
      }),
    );
    expect(created.body.errors).toBeUndefined();
    const id = created.body.data.createSite.id as string;
    expect(created.body.data.createSite.freezes).toEqual([
      { from: '2026-08-15T00:00', to: '2026-08-16T00:00', reason: null },
    ]);
    const updated = await gql(
      url,
      `mutation($id: ID!) { updateSite(id: $id, input: { maintenanceWindow: null, customerRef: "K-1" }) { maintenanceWindow { start } customerRef } }`,
      opts({ id }),
    );
    expect(updated.body.data.updateSite).toEqual({ maintenanceWindow: null, customerRef: 'K-1' });
    const bad = await gql(
      url,
      `mutation { createSite(input: { name: "Bad", timeZone: "Nowhere/City" }) { id } }`,
      opts(),
    );
    expect(bad.body.errors[0].extensions.code).toBe('validation_failed');

    const assign = await gql(
      url,
      `mutation($site: String) { updateDevice(serial: "ST-3", input: { site: $site }) { site { id name } } }`,
      opts({ site: id }),
    );
    expect(assign.body.data.updateDevice.site).toEqual({ id, name: 'Kolkata office' });
    const listed = await gql(
      url,
      `query($site: String) { devices(first: 10, filter: { site: $site }) { totalCount edges { node { serial site { name } } } } }`,
      opts({ site: 'kolkata office' }),
    );
    expect(listed.body.data.devices).toEqual({
      totalCount: 1,
      edges: [{ node: { serial: 'ST-3', site: { name: 'Kolkata office' } } }],
    });

    const sites = await gql(url, `{ sites(first: 10) { totalCount edges { node { name deviceCount } } } }`, opts());
    expect(sites.body.data.sites.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual([
      'Austin plant',
      'Berlin HQ',
      'Kolkata office',
    ]);
    expect(
      (await gql(url, `query($id: ID!) { site(id: $id) { name } }`, opts({ id: foreignId }))).body.data.site,
    ).toBeNull();
    const foreignDelete = await gql(url, `mutation($id: ID!) { deleteSite(id: $id) { id } }`, opts({ id: foreignId }));
    expect(foreignDelete.body.errors[0].extensions.code).toBe('not_found');

    const summary = await gql(url, `{ fleetSummary { total bySite { site { name } count offline } } }`, opts());
    expect(summary.body.data.fleetSummary.bySite).toEqual([
      { site: { name: 'Austin plant' }, count: 2, offline: 2 },
      { site: { name: 'Berlin HQ' }, count: 1, offline: 1 },
      { site: { name: 'Kolkata office' }, count: 1, offline: 1 },
      { site: null, count: 1, offline: 1 },
    ]);

    const deleted = await gql(url, `mutation($id: ID!) { deleteSite(id: $id) { name } }`, opts({ id }));
    expect(deleted.body.data.deleteSite.name).toBe('Kolkata office');
  });
});
