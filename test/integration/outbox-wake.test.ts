import { describe, it, expect, beforeAll, afterAll, vi } from 'vitest';
import type { Knex } from 'knex';
import { openTestDatabase, type OpenTestDatabase } from '../helpers/test-database';
import type { Database } from '#core/db/database';
import { createTransactionRunner, type TransactionRunner } from '#core/db/transaction';
import { appendEvents, appendedEvents } from '#core/events/outbox';
import { systemClock } from '#core/shared/clock';
import { newId } from '#core/shared/ids';
import { ifStarted } from '../helpers/teardown';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { claimForMqtt, connectDevice, heartbeat } from '../helpers/mqtt';
import { topics } from '#protocol/topics';

/**
 * Only a commit that appended events wakes the outbox dispatcher. Every commit used to, and
 * each wake cost a dispatch round (BEGIN, SELECT ... FOR UPDATE, COMMIT) that found nothing:
 * one per presence flush, health check and dispatch page. An event appended in a savepoint
 * (the batch claim inside an idempotent request) still wakes it, after the outer commit.
 */
describe('transaction runner: the outbox wakes only for commits with events', () => {
  let opened: OpenTestDatabase;
  let database: Database;
  let knex: Knex;
  let run: TransactionRunner;
  let wakes: Array<{ events: boolean }>;
  let accountId: string;

  beforeAll(async () => {
    opened = await openTestDatabase();
    database = opened.database;
    knex = database.knex;
    wakes = [];
    run = createTransactionRunner(knex, (trx) => wakes.push({ events: appendedEvents(trx) }));
    accountId = newId();
    await knex('accounts').insert({
      id: accountId,
      name: 'Outbox',
      quota: 10,
      budget_minor: 100,
      currency: 'EUR',
      unit_price_minor: 1,
    });
  });
  afterAll(async () => {
    await ifStarted(opened)?.close();
  });

  const event = () => ({ accountId, type: 'device.online' as const, subject: 'S-1', data: { serial: 'S-1' } });

  it('a commit without events does not ask for a dispatch', async () => {
    wakes = [];
    await run(async (trx) => trx.raw('SELECT 1'));
    expect(wakes).toEqual([{ events: false }]);
  });

  it('a commit with events does', async () => {
    wakes = [];
    await run((trx) => appendEvents(trx, systemClock, [event()]));
    expect(wakes).toEqual([{ events: true }]);
  });

  it('events appended in a savepoint count for the outer transaction', async () => {
    wakes = [];
    await run((outer) => outer.transaction((inner) => appendEvents(inner, systemClock, [event()])));
    expect(wakes).toEqual([{ events: true }]);
  });

  it('gives events version 7 ids that rise in the order they were appended', async () => {
    for (let batch = 0; batch < 3; batch++)
      await run((trx) => appendEvents(trx, systemClock, Array.from({ length: 50 }, event)));
    const ids = (
      await knex.raw<{ rows: Array<{ id: string }> }>('SELECT id FROM events WHERE account_id = ? ORDER BY seq', [
        accountId,
      ])
    ).rows.map((r) => r.id);
    expect(ids.length).toBeGreaterThanOrEqual(150);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // The outbox's unique index of ids then grows at its right end (core/shared/ids.ts).
    expect([...ids].sort()).toEqual(ids);
  });

  it('a rolled-back transaction wakes nothing', async () => {
    wakes = [];
    await expect(
      run(async (trx) => {
        await appendEvents(trx, systemClock, [event()]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(wakes).toEqual([]);
  });
});

/**
 * The same, wired in the running service: a claim (its events written in a savepoint of the
 * idempotent request) wakes the dispatcher; a heartbeat flush that changed nothing does not.
 */
describe('the running service wakes the outbox only for commits with events', () => {
  let server: TestServer;
  let account: TestAccount;

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
  }, 60_000);
  afterAll(async () => ifStarted(server)?.close());

  it('a claim wakes it, an unchanged heartbeat does not', { timeout: 30_000 }, async () => {
    const kick = vi.spyOn(server.service.outbox, 'kick');
    const [creds] = await claimForMqtt(server, account, ['WAKE-1'], { firmware: null });
    expect(kick).toHaveBeenCalled();

    const device = await connectDevice(server.service.mqttUrl!, creds!);
    try {
      await device.publishAsync(topics.heartbeat('WAKE-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      await server.service.ingest.flush();
      await server.service.outbox.settle();
      kick.mockClear();
      // The same news again: the flush writes last_seen and nothing that makes an event.
      await device.publishAsync(topics.heartbeat('WAKE-1'), heartbeat({ firmware: '1.0.0' }), { qos: 1 });
      await server.service.ingest.flush();
      expect(kick).not.toHaveBeenCalled();
    } finally {
      await device.endAsync();
      kick.mockRestore();
    }
  });
});
