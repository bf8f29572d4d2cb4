import type { Knex } from 'knex';
import http from 'node:http';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, buildFirmwareVersion, claimDevices, serials, setReported } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';
import { devicePageQuery } from '#core/devices/store/device-list.store';
import { usingPostgres } from '../helpers/test-database';
import { rootOf, rowsRead } from '../helpers/explain';

describe('GET /api/v1/devices', () => {
  let server: TestServer;
  let a: TestAccount;
  let b: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    a = await server.createAccount({ quota: 5000 });
    b = await server.createAccount({ quota: 10 });
    await buildModel(a, 'LX-200');
    await buildModel(a, 'LX-300');
    await buildModel(b, 'LX-200');
    await claimDevices(a, { serials: serials('A', 1000), model: 'LX-200', names: { 'A-0007': 'Foyer West' } });
    await claimDevices(a, { serials: serials('A', 500, 1001), model: 'LX-200' });
    await claimDevices(a, { serials: serials('V', 6), model: 'LX-300' });
    await claimDevices(b, { serials: ['B-0001', 'B-0002'], model: 'LX-200' });
    const knex = server.service.database.knex;
    const versions = ['1.9.0', '1.10.0', '2.0.0-rc.1', '2.0.0', '1.4.2.7', '1.4.2'];
    for (const [i, v] of versions.entries())
      await setReported(knex, {
        accountId: a.accountId,
        serials: [`V-000${i + 1}`],
        state: { firmware: v, status: 'online', ip: `10.0.4.${i + 1}`, lastSeen: new Date('2026-11-22T05:00:00Z') },
      });
    await setReported(knex, {
      accountId: a.accountId,
      serials: serials('A', 100),
      state: { firmware: '1.9.0', status: 'online' },
    });
    await setReported(knex, { accountId: a.accountId, serials: ['A-0101', 'A-0102'], state: { status: 'updating' } });
    // Embedded database start and seeding claims can be slow on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  const page = (account: TestAccount, query: string) => account.api.get(`/api/v1/devices?${query}`);
  const serialsOf = (body: { devices: Array<{ serial: string }> }) => body.devices.map((d) => d.serial);

  it(
    'pages with limit and an opaque cursor; total counts all matches; quota is the account quota',
    { timeout: 120_000 },
    async () => {
      const first = await page(a, 'limit=500');
      expect(first.status).toBe(200);
      expect(first.body.total).toBe(1506);
      expect(first.body.quota).toBe(5000);
      expect(first.body.devices).toHaveLength(500);
      expect(first.body.devices[0].serial).toBe('A-0001');
      expect(first.body.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      const seen = new Set<string>(serialsOf(first.body));
      let cursor: string | null = first.body.next_cursor;
      while (cursor) {
        const next = await page(a, `limit=500&cursor=${cursor}`);
        expect(next.status).toBe(200);
        for (const s of serialsOf(next.body)) {
          expect(seen.has(s)).toBe(false);
          seen.add(s);
        }
        cursor = next.body.next_cursor;
      }
      expect(seen.size).toBe(1506);
    },
  );

  it('returns the spec fields plus connectivity, update, tags, config and claimed_at', async () => {
    const res = await page(a, 'limit=1&firmware=2.0.0');
    expect(res.body.devices[0]).toEqual({
      serial: 'V-0004',
      name: 'V-0004',
      model: 'LX-300',
      firmware: '2.0.0',
      status: 'online',
      last_seen: '2026-11-22T05:00:00.000Z',
      ip: '10.0.4.4',
      connectivity: 'online',
      update: null,
      tags: {},
      config: {
        desired: {
          heartbeat_interval_s: 60,
          dim_level: 100,
          power_on_level: 100,
          timezone: 'UTC',
          maintenance_window: null,
        },
        desired_version: 1,
        reported: null,
        reported_version: null,
        in_sync: false,
      },
      uptime_s: null,
      rssi: null,
      claimed_at: expect.any(String),
      firmware_reported_invalid: null,
      refused_messages: {},
      last_refused_message: null,
      refused_fields: {},
      site: null,
    });
  });

  it('filters by model, status, exact firmware and text', async () => {
    expect(serialsOf((await page(a, 'limit=100&model=LX-300')).body)).toEqual(serials('V', 6));
    expect((await page(a, 'limit=10&model=NOPE')).body).toMatchObject({ devices: [], total: 0 });
    const updating = await page(a, 'limit=100&status=updating');
    expect(serialsOf(updating.body)).toEqual(['A-0101', 'A-0102']);
    const online = await page(a, 'limit=1&status=online');
    expect(online.body.total).toBe(106);
    expect((await page(a, 'limit=1000&firmware=1.9.0')).body.total).toBe(101);
    const text = await page(a, 'limit=10&q=foyer');
    expect(serialsOf(text.body)).toEqual(['A-0007']);
    expect((await page(a, 'limit=10&q=v-000')).body.total).toBe(6);
    // LIKE wildcards are plain characters.
    expect((await page(a, 'limit=10&q=%25')).body.total).toBe(0);
    expect((await page(a, 'limit=10&q=A_0')).body.total).toBe(0);
  });

  it('ends a walk exactly: a last page that is full has no next cursor, in both directions', async () => {
    // model=LX-300 matches V-0001..V-0006 exactly.
    const whole = await page(a, 'limit=6&model=LX-300');
    expect(serialsOf(whole.body)).toEqual(serials('V', 6));
    expect(whole.body.next_cursor).toBeNull();
    const first = await page(a, 'limit=3&model=LX-300&sort=-name');
    expect(serialsOf(first.body)).toEqual(['V-0006', 'V-0005', 'V-0004']);
    const second = await page(a, `limit=3&model=LX-300&sort=-name&cursor=${first.body.next_cursor}`);
    expect(serialsOf(second.body)).toEqual(['V-0003', 'V-0002', 'V-0001']);
    expect(second.body.next_cursor).toBeNull();
    const one = await page(a, 'limit=5&model=LX-300');
    const rest = await page(a, `limit=5&model=LX-300&cursor=${one.body.next_cursor}`);
    expect(serialsOf(rest.body)).toEqual(['V-0006']);
    expect(rest.body).toMatchObject({ total: 6, next_cursor: null });
    expect((await page(a, 'limit=5&model=NOPE')).body).toEqual({
      devices: [],
      total: 0,
      quota: 5000,
      next_cursor: null,
    });
  });

  it('compares firmware as versions in firmware_lt (1.9.0 < 1.10.0, 2.0.0-rc.1 < 2.0.0, four parts)', async () => {
    const lt = async (v: string) =>
      serialsOf((await page(a, `limit=1000&model=LX-300&firmware_lt=${encodeURIComponent(v)}`)).body);
    // V-1 1.9.0, V-2 1.10.0, V-3 2.0.0-rc.1, V-4 2.0.0, V-5 1.4.2.7, V-6 1.4.2
    expect(await lt('1.10.0')).toEqual(['V-0001', 'V-0005', 'V-0006']);
    expect(await lt('2.0.0')).toEqual(['V-0001', 'V-0002', 'V-0003', 'V-0005', 'V-0006']);
    expect(await lt('2.0.0-rc.1')).toEqual(['V-0001', 'V-0002', 'V-0005', 'V-0006']);
    expect(await lt('1.4.2.7')).toEqual(['V-0006']);
    expect(await lt('1.4.3')).toEqual(['V-0005', 'V-0006']);
    expect(await lt('1.4.2')).toEqual([]);
    // Devices that never reported a version are not "older".
    expect((await page(a, 'limit=1000&firmware_lt=99')).body.total).toBe(106);
  });

  it('sorts a page by any column on the server: firmware as versions, descending, ties by serial in the same direction', async () => {
    const byFirmware = await page(a, 'model=LX-300&limit=10&sort=firmware');
    expect(byFirmware.status).toBe(200);
    expect(byFirmware.body.devices.map((d: { firmware: string }) => d.firmware)).toEqual([
      '1.4.2',
      '1.4.2.7',
      '1.9.0',
      '1.10.0',
      '2.0.0-rc.1',
      '2.0.0',
    ]);
    const down = await page(a, 'model=LX-300&limit=10&sort=-firmware');
    expect(down.body.devices.map((d: { firmware: string }) => d.firmware)).toEqual([
      '2.0.0',
      '2.0.0-rc.1',
      '1.10.0',
      '1.9.0',
      '1.4.2.7',
      '1.4.2',
    ]);
    // Renamed "Foyer West" sorts among names case-insensitively; equal names fall back to serial.
    const byName = await page(a, 'q=A-00&limit=3&sort=-name');
    expect(byName.body.devices[0].name).toBe('Foyer West');
    // Ties are broken by serial in the same direction (what keeps keyset paging exact).
    const byStatus = await page(a, 'limit=2&sort=-status');
    expect(serialsOf(byStatus.body)).toEqual(['A-0102', 'A-0101']);
  });

  it(
    'pages a sorted list with cursors: every device exactly once, in order; a cursor only continues its own order',
    { timeout: 120_000 },
    async () => {
      const seen: string[] = [];
      const keys: string[] = [];
      let cursor: string | null = null;
      do {
        const res = await page(a, `limit=300&sort=-last_seen${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.status).toBe(200);
        for (const d of res.body.devices as Array<{ serial: string; last_seen: string | null }>) {
          seen.push(d.serial);
          keys.push(d.last_seen ?? '');
        }
        cursor = res.body.next_cursor;
      } while (cursor);
      expect(seen).toHaveLength(1506);
      expect(new Set(seen).size).toBe(1506);
      // Descending by last_seen: seen devices first, newest first; never-seen last.
      expect([...keys].sort().reverse()).toEqual(keys);
      expect(keys[0]).not.toBe('');

      // A cursor after the longest allowed name in a multi-byte script still pages on.
      expect((await a.api.patch('/api/v1/devices/A-1500', { name: 'Ł'.repeat(200) })).status).toBe(200);
      const longFirst = await page(a, 'limit=1&sort=-name');
      expect(longFirst.body.devices[0].serial).toBe('A-1500');
      const longNext = await page(a, `limit=1&sort=-name&cursor=${longFirst.body.next_cursor}`);
      expect(longNext.status).toBe(200);
      expect(longNext.body.devices[0].serial).not.toBe('A-1500');

      const first = await page(a, 'limit=10&sort=name');
      const wrongOrder = await page(a, `limit=10&sort=ip&cursor=${first.body.next_cursor}`);
      expect(wrongOrder.status).toBe(422);
      expect(wrongOrder.body.errors[0].field).toMatch(/cursor/);
      const streamed = await page(a, 'sort=name');
      expect(streamed.status).toBe(422);
    },
  );

  it('refuses bad query parameters with 422 and field errors', async () => {
    for (const query of [
      'limit=0',
      'limit=1001',
      'limit=ten',
      'status=sleeping',
      'firmware_lt=latest',
      'cursor=zzz&limit=5',
      'cursor=abc',
      'modle=LX-200',
      'limit=1&limit=2',
    ]) {
      const res = await page(a, query);
      expect(res.status, query).toBe(422);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
    }
    expect((await page(a, 'firmware_lt=latest')).body.code).toBe('invalid_version');
  });

  it('streams every matching device as one JSON document without limit', { timeout: 120_000 }, async () => {
    const all = await a.api.get('/api/v1/devices');
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(1506);
    expect(all.body.quota).toBe(5000);
    expect(all.body.devices).toHaveLength(1506);
    expect(all.body.next_cursor).toBeUndefined();
    const ordered = serialsOf(all.body);
    expect([...ordered].sort()).toEqual(ordered);
    const filtered = await a.api.get('/api/v1/devices?model=LX-300&firmware_lt=2.0.0');
    expect(filtered.body).toMatchObject({ total: 5, quota: 5000 });
    const none = await a.api.get('/api/v1/devices?model=NOPE');
    expect(none.body).toEqual({ devices: [], total: 0, quota: 5000 });
  });

  it('keeps serving when a streaming client disconnects mid-document', async () => {
    const url = new URL('/api/v1/devices', server.service.httpUrl);
    await new Promise<void>((resolve, reject) => {
      const req = http.get(url, { headers: { authorization: `Bearer ${a.apiKey}` } }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (e) => (e.message.includes('socket hang up') ? resolve() : reject(e)));
    });
    const after = await page(a, 'limit=1');
    expect(after.status).toBe(200);
  });

  it('shows claims, renames and unclaims in the next answer (totals are not served stale after own changes)', async () => {
    const c = await server.createAccount({ quota: 100 });
    await buildModel(c, 'LX-200');
    await claimDevices(c, { serials: ['C-0001', 'C-0002'], model: 'LX-200' });
    expect((await page(c, 'limit=1')).body.total).toBe(2);
    expect((await page(c, 'limit=1&q=kitchen')).body.total).toBe(0);
    await claimDevices(c, { serials: ['C-0003'], model: 'LX-200' });
    expect((await page(c, 'limit=1')).body.total).toBe(3);
    expect((await c.api.patch('/api/v1/devices/C-0002', { name: 'Kitchen' })).status).toBe(200);
    expect((await page(c, 'limit=1&q=kitchen')).body.total).toBe(1);
    expect((await c.api.delete('/api/v1/devices/C-0001')).status).toBe(204);
    expect((await page(c, 'limit=1')).body.total).toBe(2);
  });

  it('searches names and serials as they are now: claimed, renamed, unclaimed and claimed elsewhere', async () => {
    const e = await server.createAccount({ quota: 100 });
    const f = await server.createAccount({ quota: 100 });
    await buildModel(e, 'LX-200');
    await buildModel(f, 'LX-200');
    await claimDevices(e, { serials: ['E-0001', 'E-0002'], model: 'LX-200', names: { 'E-0001': 'Lobby North' } });
    const found = async (account: TestAccount, q: string) =>
      serialsOf((await page(account, `limit=10&q=${encodeURIComponent(q)}`)).body);
    expect(await found(e, 'lobby')).toEqual(['E-0001']);
    expect((await e.api.patch('/api/v1/devices/E-0001', { name: 'Atrium' })).status).toBe(200);
    expect(await found(e, 'lobby')).toEqual([]);
    expect(await found(e, 'atrium')).toEqual(['E-0001']);
    // A short term is matched row by row, a longer one through the search terms: both agree.
    expect(await found(e, 'E-')).toEqual(['E-0001', 'E-0002']);
    expect(await found(e, 'e-000')).toEqual(['E-0001', 'E-0002']);
    expect((await e.api.delete('/api/v1/devices/E-0001')).status).toBe(204);
    expect(await found(e, 'atrium')).toEqual([]);
    expect(await found(e, 'e-0001')).toEqual([]);
    await claimDevices(f, { serials: ['E-0001'], model: 'LX-200', names: { 'E-0001': 'Atrium' } });
    expect(await found(f, 'atrium')).toEqual(['E-0001']);
    expect(await found(e, 'atrium')).toEqual([]);
    expect((await page(e, 'limit=1&q=e-0001')).body.total).toBe(0);
  });

  it('lists each device exactly as GET /devices/:serial presents it (update, reported config, tags, window)', async () => {
    const x = await server.createAccount({ quota: 100 });
    await buildModel(x, 'LX-200');
    await buildFirmwareVersion(server, { accountId: x.accountId, model: 'LX-200', version: '2.1.0' });
    const claimed = await claimDevices(x, { serials: ['X-0001', 'X-0002'], model: 'LX-200', firmware: '2.1.0' });
    await claimDevices(x, { serials: ['X-0003', 'X-0004'], model: 'LX-200' });
    await x.api.patch('/api/v1/devices/X-0003', {
      tags: { site: 'Berlin "Mitte"', ключ: 'значение' },
      config: { maintenance_window: { start: '22:00', end: '04:00' }, timezone: 'Europe/Berlin' },
    });
    const knex = server.service.database.knex;
    await setReported(knex, {
      accountId: x.accountId,
      serials: ['X-0002', 'X-0003'],
      state: {
        firmware: '2.0.0-rc.1',
        status: 'online',
        ip: '10.1.2.3',
        lastSeen: new Date('2026-11-22T05:00:00.123Z'),
      },
    });
    await knex('devices')
      .where({ serial: 'X-0003' })
      .update({
        reported_config: JSON.stringify({ dim_level: 100, timezone: 'UTC' }),
        reported_config_version: 1,
        uptime_s: 3600,
        rssi: -61,
      });
    if (claimed.deployment_id !== null)
      expect(claimed.devices[0].update).toMatchObject({ state: 'queued', deployment_id: claimed.deployment_id });
    const streamed = (await x.api.get('/api/v1/devices')).body.devices;
    const paged = [
      ...(await page(x, 'limit=2')).body.devices,
      ...(await page(x, `limit=2&cursor=${(await page(x, 'limit=2')).body.next_cursor}`)).body.devices,
    ];
    expect(streamed).toHaveLength(4);
    // The claimed firmware was scheduled, so the update projection is exercised too.
    expect(
      streamed.filter((d: { update: unknown }) => d.update !== null).map((d: { serial: string }) => d.serial),
    ).toEqual(['X-0001', 'X-0002']);
    for (const [i, listed] of streamed.entries()) {
      // The luminaire summary and the health verdict are the record's only (docs/rest-devices.md).
      const { luminaire, health, ...detail } = (await x.api.get(`/api/v1/devices/${listed.serial}`)).body;
      expect([luminaire, health]).toEqual([null, null]);
      expect(listed).toEqual(detail);
      expect(paged[i]).toEqual(detail);
    }
  });

  // The embedded database has one connection, whose statements PostgreSQL plans its own way.
  it.skipIf(!usingPostgres())('plans a page statement once and runs that plan for every page', async () => {
    for (let i = 0; i < 12; i++) {
      expect((await page(a, 'status=online&limit=17')).status).toBe(200);
      // A-0100 to A-0199: a search counted to few matches reads them from the search terms.
      expect((await page(a, 'q=A-01&limit=17')).body.total).toBe(100);
    }
    // Every statement the list's connections hold, read from each of them at once: the pool
    // gives each transaction its own connection, and none ends before all have read theirs.
    const list = server.service.database.plannedOnce;
    const connections = (list.client.config as Knex.Config).pool!.max!;
    let arrived = 0;
    let allRead!: () => void;
    const everyoneRead = new Promise<void>((resolve) => (allRead = resolve));
    const perConnection = await Promise.all(
      Array.from({ length: connections }, () =>
        list.transaction(async (trx) => {
          const { rows } = await trx.raw<{
            rows: Array<{ statement: string; generic_plans: string; custom_plans: string }>;
          }>('SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements');
          if (++arrived === connections) allRead();
          await everyoneRead;
          return rows;
        }),
      ),
    );
    // This test's two statements: the page size (17, and one more to see if there is a next
    // page) is written into the text. Each ran 12 times, with its one plan.
    const runs = new Map<string, { custom: number; generic: number }>();
    for (const r of perConnection.flat().filter((row) => row.statement.includes('LIMIT 18'))) {
      const sum = runs.get(r.statement) ?? { custom: 0, generic: 0 };
      runs.set(r.statement, {
        custom: sum.custom + Number(r.custom_plans),
        generic: sum.generic + Number(r.generic_plans),
      });
    }
    expect([...runs.values()]).toEqual([
      { custom: 0, generic: 12 },
      { custom: 0, generic: 12 },
    ]);
  });

  it("reads only the account's own rows for a page, where its serials sort among another account's", async () => {
    // B-0001 and B-0002 sort between a's 1,506 A- serials and its V- ones. A page of b planned
    // once for every account (as the list runs it) or with b's values must not walk a's rows.
    const knex = server.service.database.knex;
    await knex.raw('ANALYZE devices');
    for (const mode of ['force_generic_plan', 'force_custom_plan']) {
      const statement = devicePageQuery({ accountId: b.accountId, filter: {}, afterSerial: null, limit: 101 });
      let n = 0;
      const sql = statement.sql.replace(/\?/g, () => `$${++n}`);
      const read = await knex.transaction(async (trx) => {
        await trx.raw(`SET LOCAL plan_cache_mode = ${mode}`);
        await trx.raw(`PREPARE page_of_b AS ${sql}`);
        // The account's id and nothing else: no value here needs quoting beyond the quotes.
        const values = statement.bindings.map((v) => `'${v as string}'`).join(', ');
        const explained = await trx.raw<{ rows: Array<{ 'QUERY PLAN': unknown }> }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE page_of_b(${values})`,
        );
        await trx.raw('DEALLOCATE page_of_b');
        return rowsRead(rootOf(explained.rows[0]!['QUERY PLAN']), 'devices');
      });
      expect({ mode, read }).toEqual({ mode, read: 2 });
    }
  });

  it("never lists or counts another account's devices", async () => {
    const res = await b.api.get('/api/v1/devices');
    expect(serialsOf(res.body)).toEqual(['B-0001', 'B-0002']);
    expect(res.body.total).toBe(2);
    expect(res.body.quota).toBe(10);
    expect((await page(b, 'limit=10&q=A-00')).body.total).toBe(0);
  });
});
