import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { buildModel, serials } from '../helpers/factories';
import { ManualClock } from '#core/shared/clock';
import { appendEvents } from '#core/events/outbox';
import type { NewEvent } from '#core/events/event-types';
import { startReceiver } from '../webhooks/receiver';
import { usingPostgres } from '../helpers/test-database';
import { ADVISORY_LOCKS } from '#core/db/advisory-lock';
import { ifStarted } from '../helpers/teardown';

const DAY_MS = 86_400_000;

describe('retention (HISTORY_RETENTION_DAYS=30, EVENT_RETENTION_DAYS=7)', () => {
  const clock = new ManualClock('2026-01-01T08:00:00Z');
  let server: TestServer;
  let account: TestAccount;
  let up: Awaited<ReturnType<typeof startReceiver>>;
  let down: Awaited<ReturnType<typeof startReceiver>>;
  const [serial] = serials('RET', 1);

  const emit = async (events: Array<Omit<NewEvent, 'accountId'>>) => {
    await appendEvents(
      server.service.database.knex,
      clock,
      events.map((e) => ({ accountId: account.accountId, ...e })),
    );
    await server.service.outbox.settle();
    await server.service.webhookWorker.settle();
  };
  const history = async () =>
    ((await account.api.get(`/api/v1/devices/${serial}/history`)).body.events as Array<{ type: string }>).map(
      (e) => e.type,
    );
  const deliveries = async (webhookId: string) =>
    (await account.api.get(`/api/v1/webhooks/${webhookId}/deliveries`)).body.deliveries as Array<{
      event_id: string;
      status: string;
    }>;

  beforeAll(async () => {
    server = await startTestServer({ clock, env: { HISTORY_RETENTION_DAYS: '30', EVENT_RETENTION_DAYS: '7' } });
    account = await server.createAccount();
    up = await startReceiver();
    down = await startReceiver();
    down.setMode('down');
  });
  afterAll(async () => {
    await ifStarted(up)?.close();
    await ifStarted(down)?.close();
    await ifStarted(server)?.close();
  });

  it('deletes what is past its retention, keeps what is recent or still needed, and is visible in the API', async () => {
    // Day 0: a claim (history `claimed`, an idempotency key), an event delivered to a receiver
    // that is up, and one whose delivery to a receiver that is down is still being retried.
    await buildModel(account, 'LX-200');
    const claimed = await account.api.post(
      '/api/v1/devices/claim',
      { serials: [serial], model: 'LX-200' },
      { 'Idempotency-Key': 'claim-day-0' },
    );
    expect(claimed.status).toBe(201);
    const hookUp = (await account.api.post('/api/v1/webhooks', { url: up.url, event_types: ['device.online'] })).body
      .webhook.id as string;
    const hookDown = (await account.api.post('/api/v1/webhooks', { url: down.url, event_types: ['device.offline'] }))
      .body.webhook.id as string;
    await emit([{ type: 'device.online', subject: serial, data: { serial, n: 1 } }]);
    await emit([{ type: 'device.offline', subject: serial, data: { serial, n: 2 } }]);
    expect(up.received).toHaveLength(1);
    expect((await deliveries(hookDown))[0]!.status).toBe('pending');
    const oldDelivered = (await deliveries(hookUp))[0]!.event_id;
    // The sender is stopped (as if it were down for weeks), so the retry stays pending.
    await server.service.webhookWorker.stop();

    // Day 40: a rename (recent history) and a recent event.
    clock.advance(40 * DAY_MS);
    expect((await account.api.patch(`/api/v1/devices/${serial}`, { name: 'Lobby 1' })).status).toBe(200);
    await appendEvents(server.service.database.knex, clock, [
      { accountId: account.accountId, type: 'device.online', subject: serial, data: { serial, n: 3 } },
    ]);
    await server.service.outbox.settle();
    expect(await history()).toEqual(['renamed', 'claimed']);
    expect(await deliveries(hookUp)).toHaveLength(2);
    // An event from day 0 that was never dispatched (the dispatcher is stopped here): it must survive.
    await server.service.outbox.stop();
    await appendEvents(server.service.database.knex, clock, [
      {
        accountId: account.accountId,
        type: 'device.online',
        subject: serial,
        data: { n: 4 },
        occurredAt: new Date(clock.now().getTime() - 40 * DAY_MS),
      },
    ]);

    const result = await server.service.services.retention.pruneOnce();
    // The claim's own events of day 0 (device.claimed, ...) go too, with the delivered one.
    expect(result).toMatchObject({ deviceEvents: 1, webhookDeliveries: 1, idempotencyKeys: 1 });
    expect(result.events).toBeGreaterThanOrEqual(1);

    expect(await history()).toEqual(['renamed']);
    const kept = await deliveries(hookUp);
    expect(kept).toHaveLength(1);
    expect(kept[0]!.event_id).not.toBe(oldDelivered);
    // The pending delivery and its event stay until the retries end.
    expect(await deliveries(hookDown)).toHaveLength(1);
    // Left: the event still owed to a receiver, the recent one, the undispatched one; nothing else old.
    const events = await server.service.database
      .knex('events')
      .where({ account_id: account.accountId })
      .orderBy('seq')
      .select<Array<{ data: { n?: number }; occurred_at: Date }>>('data', 'occurred_at');
    const cutoff = clock.now().getTime() - 7 * DAY_MS;
    expect(events.filter((e) => new Date(e.occurred_at).getTime() < cutoff).map((e) => e.data.n)).toEqual([2, 4]);
    expect(events.filter((e) => e.data.n !== undefined).map((e) => e.data.n)).toEqual([2, 3, 4]);
    // The idempotency key expired with its 24 hours: the same key is a new request now.
    const again = await account.api.post(
      '/api/v1/devices/claim',
      { serials: serials('RET2', 1), model: 'LX-200' },
      { 'Idempotency-Key': 'claim-day-0' },
    );
    expect(again.status).toBe(201);

    // A second pass finds nothing more to do.
    expect(Object.values(await server.service.services.retention.pruneOnce()).every((n) => n === 0)).toBe(true);

    // An endpoint that is disabled retries nothing: its pending delivery no longer holds the old
    // event, which goes with it (the outbox would otherwise keep it for as long as the endpoint
    // stays disabled).
    expect((await account.api.patch(`/api/v1/webhooks/${hookDown}`, { enabled: false })).status).toBe(200);
    expect(await server.service.services.retention.pruneOnce()).toMatchObject({ events: 1, webhookDeliveries: 1 });
    expect(await deliveries(hookDown)).toHaveLength(0);
    expect(
      (await server.service.database.knex('events').where({ account_id: account.accountId }).select('data'))
        .map((e: { data: { n?: number } }) => e.data.n)
        .filter((n) => n !== undefined),
    ).toEqual([3, 4]);
  });

  it('walks a long history window by window to the end of what is old', async () => {
    const knex = server.service.database.knex;
    const device = await knex('devices')
      .where({ serial })
      .first<{ id: string; account_id: string }>('id', 'account_id');
    const old = new Date(clock.now().getTime() - 31 * DAY_MS);
    // 12,000 old rows (more than two windows of the walk), then one recent.
    await knex.raw(
      `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
       SELECT ?, ?, 'status_changed', jsonb_build_object('i', i), ? FROM generate_series(1, 12000) AS i`,
      [device.account_id, device.id, old],
    );
    await knex('device_events').insert({
      account_id: device.account_id,
      device_id: device.id,
      type: 'status_changed',
      data: JSON.stringify({ recent: true }),
      occurred_at: clock.now(),
    });
    const result = await server.service.services.retention.pruneOnce();
    expect(result.deviceEvents).toBe(12_000);
    // The background worker's pass is what /metrics counts.
    await knex.raw(
      `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
       SELECT ?, ?, 'status_changed', '{}'::jsonb, ? FROM generate_series(1, 10)`,
      [device.account_id, device.id, old],
    );
    await server.service.retentionWorker.runNow();
    const metrics = await (await fetch(`${server.service.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/^fleet_retention_deleted_rows_total\{table="deviceEvents"\} 10$/m);
    expect((await history()).slice(0, 2)).toEqual(['status_changed', 'renamed']);
  });

  it.runIf(usingPostgres())(
    'runs the background pass in one process of a cluster at a time (advisory lock)',
    async () => {
      const knex = server.service.database.knex;
      const device = await knex('devices')
        .where({ serial })
        .first<{ id: string; account_id: string }>('id', 'account_id');
      await knex.raw(
        `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
       SELECT ?, ?, 'status_changed', '{}'::jsonb, ? FROM generate_series(1, 5)`,
        [device.account_id, device.id, new Date(clock.now().getTime() - 31 * DAY_MS)],
      );
      const oldRows = async () =>
        Number(
          (
            await knex('device_events')
              .where('occurred_at', '<', new Date(clock.now().getTime() - 30 * DAY_MS))
              .count('* as n')
          )[0]!.n,
        );
      // Another process's pass, as PostgreSQL sees it: a session holding the lock.
      const other = await knex.client.acquireConnection();
      try {
        await other.query('SELECT pg_advisory_lock($1)', [ADVISORY_LOCKS.retention]);
        await server.service.retentionWorker.runNow();
        expect(await oldRows()).toBe(5);
        await other.query('SELECT pg_advisory_unlock($1)', [ADVISORY_LOCKS.retention]);
      } finally {
        await knex.client.releaseConnection(other);
      }
      await server.service.retentionWorker.runNow();
      expect(await oldRows()).toBe(0);
    },
  );

  it('keeps everything with 0 days (retention off)', async () => {
    const knex = server.service.database.knex;
    const { RetentionService } = await import('#core/housekeeping/retention.service');
    const before = Number((await knex('device_events').count('* as n'))[0]!.n);
    clock.advance(400 * DAY_MS);
    const off = new RetentionService({ knex, clock, logger: server.service.logger }, { historyDays: 0, eventDays: 0 });
    expect(await off.pruneOnce()).toMatchObject({ deviceEvents: 0, events: 0, webhookDeliveries: 0 });
    expect(Number((await knex('device_events').count('* as n'))[0]!.n)).toBe(before);
  });
});
