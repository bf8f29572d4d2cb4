import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, serials } from '../helpers/factories';
import { uploadFirmware } from './ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { usingPostgres } from '../helpers/test-database';
import { DISPATCH_START, lockDispatchPage } from '#core/deployments/store/dispatch.store';

const DEVICES = 1500;
const PAGE = 100;

/**
 * A server with an account whose `count` devices of LX-200 were claimed on 1.0.0, and 2.0.0
 * uploaded after the claims (so no claim deployment targets it). Nothing is connected; the sweep
 * is off, so only what a test asks for is dispatched.
 */
async function fleetOnOldFirmware(prefix: string, count: number): Promise<{ server: TestServer; a: TestAccount }> {
  const server = await startTestServer({ env: { OTA_SWEEP_INTERVAL_MS: '0', OTA_RESEND_AFTER_S: '3600' } });
  const a = await server.createAccount({ quota: 5000, budget: 100_000, rateLimitPerMinute: 1_000_000 });
  await buildModel(a, 'LX-200');
  await uploadFirmware(a, { model: 'LX-200', version: '1.0.0', bytes: Buffer.alloc(2000, 1), expectStatus: 201 });
  const all = serials(prefix, count);
  for (let i = 0; i < all.length; i += 1000)
    await claimDevices(a, { serials: all.slice(i, i + 1000), model: 'LX-200', firmware: '1.0.0' });
  await uploadFirmware(a, { model: 'LX-200', version: '2.0.0', bytes: Buffer.alloc(2000, 2), expectStatus: 201 });
  return { server, a };
}

/**
 * A dispatch page of a large deployment reads about a page of its updates, not every queued one
 * left: pages of a deployment to 100,000 connected devices otherwise read and sorted hundreds of
 * thousands of rows in all (migration 20261129070000_dispatch_pages_in_batch_order). Counted from
 * PostgreSQL's statistics of the page's own transaction (rows fetched from device_updates), so
 * PostgreSQL only.
 */
describe.runIf(usingPostgres())('dispatch pages of a large deployment', { timeout: 180_000 }, () => {
  let server: TestServer;
  let a: TestAccount;
  let deploymentId: string;

  beforeAll(async () => {
    ({ server, a } = await fleetOnOldFirmware('PAGE', DEVICES));
    // Created while its devices are offline: every update stays queued.
    const res = await a.api.post('/api/v1/firmware/deploy', { firmware_version: '2.0.0', filter: { model: 'LX-200' } });
    expect(res.status).toBe(202);
    deploymentId = res.body.deployment_id as string;
    await server.service.services.ota.idle();
    const knex = server.service.database.knex;
    // Connected and reporting 1.0.0 now, as heartbeats would have left them, with no dispatch made for them.
    await knex.raw(
      `UPDATE devices SET connectivity = 'online', status = 'online', firmware = '1.0.0' WHERE account_id = ?`,
      [a.accountId],
    );
    await knex.raw('ANALYZE device_updates, devices');
  }, 120_000);
  afterAll(async () => {
    await ifStarted(server)?.close();
  });

  /** Rows of device_updates this transaction fetched so far. */
  const fetched = async (trx: Knex.Transaction): Promise<number> =>
    (
      await trx.raw<{ rows: Array<{ n: number }> }>(
        `SELECT (coalesce(idx_tup_fetch, 0) + seq_tup_read)::int AS n FROM pg_stat_xact_user_tables WHERE relname = 'device_updates'`,
      )
    ).rows[0]!.n;

  const page = (trx: Knex.Transaction, after = DISPATCH_START) =>
    lockDispatchPage(trx, { deploymentId, batch: 0, after, limit: PAGE });

  it('reads about a page of updates for each page, and every update once', async () => {
    const knex = server.service.database.knex;
    const queued = await knex.raw<{ rows: Array<{ n: number }> }>(
      `SELECT count(*)::int AS n FROM device_updates WHERE deployment_id = ? AND state = 'queued'`,
      [deploymentId],
    );
    expect(queued.rows[0]!.n).toBe(DEVICES);

    // Every update once, in pages that follow one another, each in a transaction of its own as
    // the dispatch takes them; each page reads its rows, then the same rows again by id for what
    // their commands need, and not the rest of the deployment.
    const seen = new Set<string>();
    const readPerPage: number[] = [];
    for (let after = DISPATCH_START; ;) {
      const trx = await knex.transaction();
      try {
        const before = await fetched(trx);
        const next = await page(trx, after);
        if (!next) break;
        readPerPage.push((await fetched(trx)) - before);
        expect(next.candidates.length).toBeLessThanOrEqual(PAGE);
        for (const c of next.candidates) {
          expect(seen.has(c.id)).toBe(false);
          seen.add(c.id);
        }
        after = next.last;
      } finally {
        await trx.rollback();
      }
    }
    expect(seen.size).toBe(DEVICES);
    expect(readPerPage).toHaveLength(DEVICES / PAGE);
    expect(Math.max(...readPerPage)).toBeLessThan(4 * PAGE);

    // A device that just became ready: its own update, without a walk through the deployment's.
    const last = [...seen].at(-1)!;
    const deviceId = (
      await knex.raw<{ rows: Array<{ device_id: string }> }>('SELECT device_id FROM device_updates WHERE id = ?', [
        last,
      ])
    ).rows[0]!.device_id;
    const trx = await knex.transaction();
    try {
      const before = await fetched(trx);
      const ready = await lockDispatchPage(trx, {
        deploymentId,
        batch: 0,
        after: DISPATCH_START,
        limit: PAGE,
        readyDeviceIds: [deviceId],
      });
      expect(ready?.candidates.map((c) => c.id)).toEqual([last]);
      expect((await fetched(trx)) - before).toBeLessThan(10);
    } finally {
      await trx.rollback();
    }
  });
});

/**
 * A deployment's job ids are version 7 UUIDs that rise in its rollout order (batch by batch), so
 * the indexes ending in the id grow at their right end as its targets are written
 * (core/deployments/store/job-ids.ts). Both databases.
 */
describe('job ids of a deployment', { timeout: 120_000 }, () => {
  let server: TestServer;
  let a: TestAccount;

  beforeAll(async () => {
    ({ server, a } = await fleetOnOldFirmware('JOB', 60));
  }, 60_000);
  afterAll(async () => {
    await ifStarted(server)?.close();
  });

  it('are version 7 UUIDs, unique, rising batch by batch', async () => {
    const res = await a.api.post('/api/v1/firmware/deploy', {
      firmware_version: '2.0.0',
      filter: { model: 'LX-200' },
      rollout: { batches: [10, 50, 100], failure_threshold_percent: 50 },
    });
    expect(res.status).toBe(202);
    const rows = (
      await server.service.database.knex.raw<{ rows: Array<{ id: string; batch: number }> }>(
        'SELECT id, batch FROM device_updates WHERE deployment_id = ? ORDER BY id',
        [res.body.deployment_id],
      )
    ).rows;
    expect(rows).toHaveLength(60);
    expect(new Set(rows.map((r) => r.id)).size).toBe(60);
    for (const r of rows) expect(r.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}$/);
    // In id order, the batches never go back: 6, 24 and 30 targets.
    const batches = rows.map((r) => r.batch);
    expect(batches).toEqual([...batches].sort((x, y) => x - y));
    expect(batches.filter((b) => b === 0)).toHaveLength(6);
    // The time part is the deployment's creation, in milliseconds since 1970.
    const ms = parseInt(rows[0]!.id.replace(/-/g, '').slice(0, 12), 16);
    expect(Math.abs(ms - Date.now())).toBeLessThan(60_000);
  });
});
