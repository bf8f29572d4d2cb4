import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, serials } from '../helpers/factories';
import { ifStarted } from '../helpers/teardown';

/**
 * How REST presents the allocation and its refusals (snake_case fields, problem+json with the
 * details). The rules themselves (thresholds, races for the last slots, ledger) are shown over the
 * services in test/services/allocation.test.ts.
 */
describe('allocation over REST: the allocation and quota and budget refusals', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer();
    // Embedded database start and seeding claims can be slow on a busy machine.
  }, 180_000);
  afterAll(async () => ifStarted(server)?.close());

  it('GET /api/v1/allocation shows quota, provisioned, budget, unit price and thresholds', async () => {
    const acc = await server.createAccount({ quota: 10, budget: 100, unitPrice: 2.5, currency: 'EUR' });
    await buildModel(acc, 'LX-200');
    const empty = await acc.api.get('/api/v1/allocation');
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({
      quota: 10,
      provisioned: 0,
      available: 10,
      budget: { amount: 100, currency: 'EUR', spent: 0, remaining: 100 },
      unit_price: 2.5,
      thresholds: [80, 90, 100]
        .map((p) => ({ kind: 'quota', percent: p, reached_at: null }))
        .concat([80, 90, 100].map((p) => ({ kind: 'budget', percent: p, reached_at: null }))),
    });
    await claimDevices(acc, { serials: serials('AL', 8), model: 'LX-200' });
    const after = (await acc.api.get('/api/v1/allocation')).body;
    expect(after).toMatchObject({ provisioned: 8, available: 2, budget: { spent: 20, remaining: 80 } });
    expect(
      after.thresholds.find((t: { kind: string; percent: number }) => t.kind === 'quota' && t.percent === 80)
        .reached_at,
    ).toEqual(expect.any(String));
    expect(
      after.thresholds.find((t: { kind: string; percent: number }) => t.kind === 'quota' && t.percent === 90)
        .reached_at,
    ).toBeNull();
  });

  it('refuses a claim past the quota, listing the serials that do not fit, and writes nothing', async () => {
    const acc = await server.createAccount({ quota: 5, budget: 1000, unitPrice: 1 });
    await buildModel(acc, 'LX-200');
    await claimDevices(acc, { serials: serials('Q', 3), model: 'LX-200' });
    const res = await acc.api.post('/api/v1/devices/claim', { serials: serials('Q', 3, 4), model: 'LX-200' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({
      code: 'quota_exceeded',
      quota: 5,
      provisioned: 3,
      available: 2,
      requested: 3,
      offending_serials: ['Q-0006'],
    });
    const alloc = (await acc.api.get('/api/v1/allocation')).body;
    expect(alloc).toMatchObject({ provisioned: 3, budget: { spent: 3 } });
    expect((await acc.api.get('/api/v1/devices/Q-0004')).status).toBe(404);
  });

  it('refuses a claim past the budget and writes nothing', async () => {
    const acc = await server.createAccount({ quota: 100, budget: 10, unitPrice: 3 });
    await buildModel(acc, 'LX-200');
    await claimDevices(acc, { serials: serials('M', 2), model: 'LX-200' });
    const res = await acc.api.post('/api/v1/devices/claim', { serials: serials('M', 2, 3), model: 'LX-200' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({
      code: 'budget_exceeded',
      remaining: 4,
      required: 6,
      currency: 'EUR',
      offending_serials: ['M-0004'],
    });
    expect((await acc.api.get('/api/v1/allocation')).body).toMatchObject({
      provisioned: 2,
      budget: { spent: 6, remaining: 4 },
    });
    const ledger = await server.service.database.knex('ledger_entries').where({ account_id: acc.accountId });
    expect(ledger).toHaveLength(1);
  });
});
