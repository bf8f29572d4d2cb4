import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { openTestDatabase, usingPostgres, type OpenTestDatabase } from '../helpers/test-database';
import { countReconnects } from '#core/deployments/store/update-health.store';
import { MAX_HEALTH_WINDOW_MINUTES } from '#core/deployments/deployment-types';
import { newId } from '#core/shared/ids';
import { insertFirmwareVersion } from '../helpers/factories';

const HOUR = 3600_000;
const NOW = new Date('2026-11-29T12:00:00Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);

/** An account with one model and firmware 2.0.0, as rows: what a deployment row refers to. */
async function account(knex: Knex): Promise<{ accountId: string; modelId: string; firmwareId: string }> {
  const accountId = newId();
  const modelId = newId();
  await knex('accounts').insert({
    id: accountId,
    name: 'gate',
    quota: 100_000,
    budget_minor: 0,
    currency: 'EUR',
    unit_price_minor: 0,
  });
  await knex('models').insert({ id: modelId, account_id: accountId, name: 'LX-200' });
  const firmwareId = await insertFirmwareVersion(knex, { accountId, modelId, version: '2.0.0' });
  return { accountId, modelId, firmwareId };
}

/** A finished deployment with the given health window (minutes). */
async function deployment(
  knex: Knex,
  owner: { accountId: string; modelId: string; firmwareId: string },
  windowMinutes: number,
): Promise<string> {
  const id = newId();
  await knex('deployments').insert({
    id,
    account_id: owner.accountId,
    firmware_version_id: owner.firmwareId,
    model_id: owner.modelId,
    target_version: '2.0.0',
    status: 'finished',
    rollout: JSON.stringify({ health_window_minutes: windowMinutes, health_max_reconnects: 3 }),
  });
  return id;
}

/** Succeeded updates, one per (device, deployment, finished) given. */
async function succeeded(
  knex: Knex,
  accountId: string,
  firmwareId: string,
  rows: Array<{ deviceId: string; deploymentId: string; finishedAt: Date }>,
): Promise<void> {
  for (let i = 0; i < rows.length; i += 1000)
    await knex('device_updates').insert(
      rows.slice(i, i + 1000).map((r) => ({
        id: newId(),
        account_id: accountId,
        deployment_id: r.deploymentId,
        device_id: r.deviceId,
        firmware_version_id: firmwareId,
        target_version: '2.0.0',
        state: 'succeeded',
        sent_at: new Date(r.finishedAt.getTime() - HOUR),
        finished_at: r.finishedAt,
        created_at: new Date(r.finishedAt.getTime() - 2 * HOUR),
      })),
    );
}

const gate = (knex: Knex, deviceIds: string[]) =>
  countReconnects(knex, { deviceIds, now: NOW, defaultWindowMinutes: 10, defaultMaxReconnects: 3 });

/**
 * The rollout health gate judges each reconnecting device by its last succeeded update, within
 * that update's window; it reads only updates that finished within the longest window a rollout
 * may set (store/update-health.store.ts countReconnects). Both databases.
 */
describe('health gate: which update a reconnect counts against', { timeout: 60_000 }, () => {
  let db: OpenTestDatabase | undefined;
  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db?.close();
  });

  it('counts the last update within its window, up to the longest window, and never an older one', async () => {
    const knex = db!.database.knex;
    const owner = await account(knex);
    const longest = await deployment(knex, owner, MAX_HEALTH_WINDOW_MINUTES);
    const short = await deployment(knex, owner, 10);
    const [inLongWindow, afterLongWindow, shortAfterLong, recent] = [newId(), newId(), newId(), newId()];
    await succeeded(knex, owner.accountId, owner.firmwareId, [
      // 23 hours after an update whose window is a day: counted.
      { deviceId: inLongWindow, deploymentId: longest, finishedAt: ago(23 * HOUR) },
      // 25 hours after it: outside.
      { deviceId: afterLongWindow, deploymentId: longest, finishedAt: ago(25 * HOUR) },
      // A newer update with a 10-minute window, finished an hour ago, is the one judged: the
      // older update whose day-long window still runs is not counted instead.
      { deviceId: shortAfterLong, deploymentId: longest, finishedAt: ago(3 * HOUR) },
      { deviceId: shortAfterLong, deploymentId: short, finishedAt: ago(HOUR) },
      // Five minutes after an update with a 10-minute window, with old updates before it.
      { deviceId: recent, deploymentId: longest, finishedAt: ago(72 * HOUR) },
      { deviceId: recent, deploymentId: short, finishedAt: ago(5 * 60_000) },
    ]);

    const counted = await gate(knex, [inLongWindow, afterLongWindow, shortAfterLong, recent]);
    expect(
      counted.map((c) => ({ device: c.deviceId, deployment: c.deploymentId, reconnects: c.reconnectsAfter })),
    ).toEqual(
      expect.arrayContaining([
        { device: inLongWindow, deployment: longest, reconnects: 1 },
        { device: recent, deployment: short, reconnects: 1 },
      ]),
    );
    expect(counted).toHaveLength(2);
  });
});

/**
 * Reconnecting devices whose updates all finished long ago cost the gate an index probe each,
 * not a read of their whole update history (migrations/20261129090000_succeeded_updates_by_device).
 * Counted from PostgreSQL's statistics of the statement's own transaction, so PostgreSQL only.
 */
describe.runIf(usingPostgres())('health gate: rows read for devices updated long ago', { timeout: 120_000 }, () => {
  let db: OpenTestDatabase | undefined;
  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db?.close();
  });

  it('reads none of their updates', async () => {
    const knex = db!.database.knex;
    const owner = await account(knex);
    const deployments: string[] = [];
    for (let i = 0; i < 5; i++) deployments.push(await deployment(knex, owner, MAX_HEALTH_WINDOW_MINUTES));
    const devices = Array.from({ length: 2000 }, () => newId());
    // Five updates each, the newest two days old.
    await succeeded(
      knex,
      owner.accountId,
      owner.firmwareId,
      devices.flatMap((deviceId) =>
        deployments.map((deploymentId, i) => ({ deviceId, deploymentId, finishedAt: ago((2 + 5 * i) * 24 * HOUR) })),
      ),
    );
    await knex.raw('ANALYZE device_updates, deployments');

    // On a connection that keeps one plan per prepared statement, as the service runs the gate.
    const trx = await db!.database.plannedOnce.transaction();
    try {
      const reconnecting = devices.slice(0, 200);
      const counted = await countReconnects(trx, {
        deviceIds: reconnecting,
        now: NOW,
        defaultWindowMinutes: 10,
        defaultMaxReconnects: 3,
      });
      expect(counted).toEqual([]);
      const read = await trx.raw<{ rows: Array<{ n: number }> }>(
        `SELECT (coalesce(idx_tup_fetch, 0) + seq_tup_read)::int AS n FROM pg_stat_xact_user_tables WHERE relname = 'device_updates'`,
      );
      // Before the index and the bound: 30,004 rows (the planner scanned every update).
      expect(read.rows[0]!.n).toBeLessThan(20);
      // Prepared and planned once: planning it took several times its execution (update-health.store.ts).
      const plans = await trx.raw<{ rows: Array<{ generic_plans: number; custom_plans: number }> }>(
        `SELECT generic_plans::int, custom_plans::int FROM pg_prepared_statements WHERE statement LIKE 'WITH last AS%'`,
      );
      expect(plans.rows).toEqual([{ generic_plans: 1, custom_plans: 0 }]);
    } finally {
      await trx.rollback();
    }
  });
});
