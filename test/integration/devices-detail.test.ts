import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildFirmwareVersion, buildModel, claimDevices } from '../helpers/factories';
import { sha256Hex } from '#core/shared/secrets';
import { recordGateway, type GatewayRecording } from '../helpers/stand-ins';
import { ifStarted } from '../helpers/teardown';

describe('one device: read, configure, history, credentials, unclaim', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;
  let viewer: TestAccount['api'];
  let gateway: GatewayRecording;

  beforeAll(async () => {
    server = await startTestServer();
    gateway = recordGateway(server.service.services.gateway, { passThrough: false });
    a = await server.createAccount();
    b = await server.createAccount();
    await buildModel(a, 'LX-200');
    await claimDevices(a, { serials: ['D-1', 'D-2', 'D-3', 'D-4'], model: 'LX-200' });
    const key = await a.api.post('/api/v1/api-keys', { name: 'dashboard', role: 'viewer' });
    viewer = a.api.withKey(key.body.secret);
    // Embedded database start and seeding claims can be slow on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it('reads a device; unknown serials, malformed serials and other accounts answer the same 404', async () => {
    const own = await a.api.get('/api/v1/devices/D-1');
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ serial: 'D-1', model: 'LX-200', status: 'offline' });
    const missing = await a.api.get('/api/v1/devices/NOPE-1');
    const foreign = await b.api.get('/api/v1/devices/D-1');
    const malformed = await a.api.get('/api/v1/devices/' + encodeURIComponent('bad serial!'));
    for (const res of [missing, foreign, malformed]) {
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect(foreign.body.detail).toBe(missing.body.detail);
  });

  it('PATCH merges name, tags and config; bumps the config version and pushes it after commit', async () => {
    gateway.configs = [];
    const res = await a.api.patch('/api/v1/devices/D-1', {
      name: 'Stage left',
      tags: { site: 'Berlin', floor: '2' },
      config: { dim_level: 40, timezone: 'Europe/Berlin', maintenance_window: { start: '22:00', end: '04:00' } },
    });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('Stage left');
    expect(res.body.tags).toEqual({ site: 'Berlin', floor: '2' });
    expect(res.body.config.desired).toEqual({
      heartbeat_interval_s: 60,
      dim_level: 40,
      power_on_level: 100,
      timezone: 'Europe/Berlin',
      maintenance_window: { start: '22:00', end: '04:00' },
    });
    expect(res.body.config.desired_version).toBe(2);
    expect(gateway.configs).toEqual([{ serial: 'D-1', version: 2, config: res.body.config.desired }]);

    const second = await a.api.patch('/api/v1/devices/D-1', {
      tags: { floor: null, zone: 'A' },
      config: { heartbeat_interval_s: 300, maintenance_window: null },
    });
    expect(second.status).toBe(200);
    expect(second.body.tags).toEqual({ site: 'Berlin', zone: 'A' });
    expect(second.body.name).toBe('Stage left');
    expect(second.body.config.desired).toMatchObject({
      heartbeat_interval_s: 300,
      dim_level: 40,
      maintenance_window: null,
    });
    expect(second.body.config.desired_version).toBe(3);
    const row = await server.service.database.knex('devices').where({ serial: 'D-1' }).first('heartbeat_interval_s');
    expect(row.heartbeat_interval_s).toBe(300);

    // Same values again: nothing changes, nothing is pushed.
    gateway.configs = [];
    const same = await a.api.patch('/api/v1/devices/D-1', { config: { heartbeat_interval_s: 300 } });
    expect(same.body.config.desired_version).toBe(3);
    expect(gateway.configs).toEqual([]);

    const outbox = await server.service.database
      .knex('events')
      .where({ account_id: a.accountId, type: 'device.updated', subject: 'D-1' });
    expect(outbox).toHaveLength(2);
  });

  it('keeps history newest first with paging', async () => {
    const first = await a.api.get('/api/v1/devices/D-1/history?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.events.map((e: { type: string }) => e.type)).toEqual(['config_changed', 'tags_changed']);
    expect(first.body.events[0].data).toMatchObject({
      version: 3,
      changed: ['heartbeat_interval_s', 'maintenance_window'],
    });
    const rest = await a.api.get(`/api/v1/devices/D-1/history?limit=10&cursor=${first.body.next_cursor}`);
    expect(rest.body.events.map((e: { type: string }) => e.type)).toEqual([
      'config_changed',
      'tags_changed',
      'renamed',
      'claimed',
    ]);
    expect(rest.body.next_cursor).toBeNull();
    expect((await b.api.get('/api/v1/devices/D-1/history')).status).toBe(404);
    expect((await a.api.get('/api/v1/devices/D-1/history?cursor=nonsense')).status).toBe(422);
  });

  it('refuses invalid values, unknown fields and read-only fields with 422, changing nothing', async () => {
    const before = (await a.api.get('/api/v1/devices/D-2')).body;
    const cases: Array<[unknown, string]> = [
      [{ config: { heartbeat_interval_s: 9 } }, 'config.heartbeat_interval_s'],
      [{ config: { heartbeat_interval_s: 3601 } }, 'config.heartbeat_interval_s'],
      [{ config: { dim_level: 101 } }, 'config.dim_level'],
      [{ config: { power_on_level: -1 } }, 'config.power_on_level'],
      [{ config: { dim_level: 50.5 } }, 'config.dim_level'],
      [{ config: { timezone: 'Mars/Olympus' } }, 'config.timezone'],
      [{ config: { maintenance_window: { start: '25:00', end: '04:00' } } }, 'config.maintenance_window.start'],
      [{ config: { maintenance_window: { start: '04:00', end: '04:00' } } }, 'config.maintenance_window'],
      [{ config: { brightness: 3 } }, 'config'],
      [{ config: { dim_level: null } }, 'config.dim_level'],
      [{ serial: 'OTHER' }, '(body)'],
      [{ status: 'online' }, '(body)'],
      [{ firmware: '9.9.9', name: 'x' }, '(body)'],
      [{ account_id: b.accountId }, '(body)'],
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(201) }, 'name'],
      [{ tags: { k: 5 } }, 'tags.k'],
      [{ tags: { ['k'.repeat(65)]: 'v' } }, `tags.${'k'.repeat(65)}`],
      [{ tags: { k: 'v'.repeat(257) } }, 'tags.k'],
      [{ tags: 'site=berlin' }, 'tags'],
    ];
    for (const [body, field] of cases) {
      const res = await a.api.patch('/api/v1/devices/D-2', body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(
        res.body.errors.map((e: { field: string }) => e.field),
        JSON.stringify(body),
      ).toContain(field);
    }
    const readOnly = await a.api.patch('/api/v1/devices/D-2', { serial: 'X', status: 'online' });
    expect(readOnly.body.errors[0].message).toContain('read-only: serial, status');
    const tooMany = await a.api.patch('/api/v1/devices/D-2', {
      tags: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`t${i}`, 'v'])),
    });
    expect(tooMany.status).toBe(422);
    expect((await a.api.get('/api/v1/devices/D-2')).body).toEqual(before);
  });

  it('accepts exactly 50 tags and refuses the reserved key __proto__ instead of dropping it', async () => {
    const tags = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`t${i}`, 'v']));
    const res = await a.api.patch('/api/v1/devices/D-3', { tags });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.tags)).toHaveLength(50);
    const proto = await a.api.request('PATCH', '/api/v1/devices/D-3', {
      rawBody: '{"tags":{"__proto__":"x"}}',
      headers: { 'content-type': 'application/json' },
    });
    expect(proto.status).toBe(422);
  });

  it("cannot change, rotate, unclaim or read another account's device (404, nothing changes)", async () => {
    expect((await b.api.patch('/api/v1/devices/D-4', { name: 'mine now' })).status).toBe(404);
    expect((await b.api.post('/api/v1/devices/D-4/credentials')).status).toBe(404);
    expect((await b.api.delete('/api/v1/devices/D-4')).status).toBe(404);
    expect((await a.api.get('/api/v1/devices/D-4')).body.name).toBe('D-4');
  });

  it('refuses every write from a viewer key with 403 and lets it read', async () => {
    expect((await viewer.get('/api/v1/devices/D-4')).status).toBe(200);
    expect((await viewer.get('/api/v1/devices?limit=5')).status).toBe(200);
    expect((await viewer.get('/api/v1/allocation')).status).toBe(200);
    for (const res of [
      await viewer.patch('/api/v1/devices/D-4', { name: 'x' }),
      await viewer.post('/api/v1/devices/D-4/credentials'),
      await viewer.delete('/api/v1/devices/D-4'),
      await viewer.post('/api/v1/models', { name: 'LX-900' }),
      await viewer.post('/api/v1/devices/claim', { serial: 'VW-1', model: 'LX-200' }),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('forbidden');
    }
    expect((await a.api.get('/api/v1/devices/D-4')).body.name).toBe('D-4');
  });

  it('rotates credentials: new password shown once, old hash replaced, device disconnected', async () => {
    const knex = server.service.database.knex;
    const hashOf = async () =>
      (
        await knex('device_credentials')
          .join('devices', 'devices.id', 'device_credentials.device_id')
          .where('devices.serial', 'D-4')
          .first('secret_hash')
      ).secret_hash;
    const before = await hashOf();
    gateway.disconnects = [];
    const res = await a.api.post('/api/v1/devices/D-4/credentials');
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      serial: 'D-4',
      username: 'D-4',
      password: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const after = await hashOf();
    expect(after).not.toBe(before);
    expect(after).toBe(sha256Hex(res.body.password));
    expect(gateway.disconnects).toEqual([{ serial: 'D-4', reason: 'credentials rotated' }]);
    const history = await a.api.get('/api/v1/devices/D-4/history?limit=1');
    expect(history.body.events[0].type).toBe('credentials_rotated');
  });

  it('unclaims: device and credentials gone, disconnected, quota slot freed, nothing credited; the serial can be claimed again', async () => {
    // D-3 has history and a queued update: both go with it (they carry no foreign key since
    // migration 20261123000000, the unclaim deletes them itself).
    const knex = server.service.database.knex;
    const versionId = await buildFirmwareVersion(server, { accountId: a.accountId, model: 'LX-200', version: '9.0.0' });
    await knex('firmware_versions').where({ id: versionId }).update({ storage_key: 'never-downloaded' });
    const deployed = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '9.0.0',
      serials: ['D-3'],
      filter: { model: 'LX-200' },
    });
    expect(deployed.status, JSON.stringify(deployed.body)).toBe(202);
    const d3 = await knex('devices').where({ account_id: a.accountId, serial: 'D-3' }).first<{ id: string }>('id');
    const rowsOf = async (table: string) =>
      Number((await knex(table).where({ device_id: d3.id }).count<Array<{ c: number | string }>>('* as c'))[0]!.c);
    expect(await rowsOf('device_updates')).toBe(1);
    expect(await rowsOf('device_events')).toBeGreaterThan(1);
    const before = (await a.api.get('/api/v1/allocation')).body;
    gateway.disconnects = [];
    const res = await a.api.delete('/api/v1/devices/D-3');
    expect(res.status).toBe(204);
    expect((await a.api.get('/api/v1/devices/D-3')).status).toBe(404);
    expect((await a.api.delete('/api/v1/devices/D-3')).status).toBe(404);
    expect(gateway.disconnects).toEqual([{ serial: 'D-3', reason: 'unclaimed' }]);
    const after = (await a.api.get('/api/v1/allocation')).body;
    expect(after.provisioned).toBe(before.provisioned - 1);
    expect(after.budget.spent).toBe(before.budget.spent);
    const creds = await server.service.database.knex('device_credentials').count('* as c');
    expect(Number(creds[0]!.c)).toBe(3);
    expect(await rowsOf('device_updates')).toBe(0);
    expect(await rowsOf('device_events')).toBe(0);
    expect((await b.api.post('/api/v1/devices/claim', { serial: 'D-3', model: 'LX-200' })).body.code).toBe(
      'unknown_model',
    );
    await buildModel(b, 'LX-200');
    expect((await b.api.post('/api/v1/devices/claim', { serial: 'D-3', model: 'LX-200' })).status).toBe(201);
  });
});
