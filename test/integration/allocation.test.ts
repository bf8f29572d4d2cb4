import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/test-server';
import { buildModel, claimDevices, serials } from '../helpers/factories';
import type { DomainEvent } from '#core/events/event-types';
import { ifStarted } from '../helpers/teardown';

describe('allocation: quota, budget, ledger and thresholds', () => {
  let server: TestServer;
  const published: DomainEvent[] = [];

  beforeAll(async () => {
    server = await startTestServer();
    server.service.bus.subscribe((event: DomainEvent) => {
      published.push(event);
    });
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

  it('emits allocation.threshold_reached once per threshold of quota and of budget', async () => {
    const acc = await server.createAccount({ quota: 10, budget: 20, unitPrice: 2 });
    await buildModel(acc, 'LX-200');
    await claimDevices(acc, { serials: serials('T', 8), model: 'LX-200' }); // 80 % of quota, 80 % of budget
    await claimDevices(acc, { serials: ['T-0009'], model: 'LX-200' }); // 90 %
    await acc.api.delete('/api/v1/devices/T-0009'); // back to 80 % of quota; the budget stays spent
    await claimDevices(acc, { serials: ['T-0010'], model: 'LX-200' }); // quota 90 % again: no second event; budget 100 %
    await server.service.outbox.settle();
    const reached = published
      .filter((e) => e.accountId === acc.accountId && e.type === 'allocation.threshold_reached')
      .map((e) => `${String(e.data.kind)}:${String(e.data.percent)}`)
      .sort();
    expect(reached).toEqual(['budget:100', 'budget:80', 'budget:90', 'quota:80', 'quota:90']);
    const alloc = (await acc.api.get('/api/v1/allocation')).body;
    expect(alloc.thresholds.filter((t: { reached_at: string | null }) => t.reached_at !== null)).toHaveLength(5);
  });

  it(
    '20 concurrent claims racing for the last 5 quota slots claim exactly 5, with a consistent ledger',
    { timeout: 120_000 },
    async () => {
      const acc = await server.createAccount({ quota: 25, budget: 1000, unitPrice: 1.5 });
      await buildModel(acc, 'LX-200');
      await claimDevices(acc, { serials: serials('R', 20), model: 'LX-200' });
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          acc.api.post('/api/v1/devices/claim', { serial: `RACE-${i}`, model: 'LX-200' }),
        ),
      );
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 201)).toHaveLength(5);
      expect(statuses.filter((s) => s === 422)).toHaveLength(15);
      for (const r of results.filter((x) => x.status === 422)) expect(r.body.code).toBe('quota_exceeded');
      const alloc = (await acc.api.get('/api/v1/allocation')).body;
      expect(alloc).toMatchObject({ provisioned: 25, available: 0, budget: { spent: 37.5 } });
      const ledger = await server.service.database.knex('ledger_entries').where({ account_id: acc.accountId });
      expect(ledger).toHaveLength(6);
      expect(ledger.reduce((sum: number, l) => sum + Number(l.devices), 0)).toBe(25);
    },
  );

  it("two accounts racing for the same serial: exactly one wins, the other hears only 'already claimed'", async () => {
    const x = await server.createAccount();
    const y = await server.createAccount();
    await buildModel(x, 'LX-200');
    await buildModel(y, 'LX-200');
    const [rx, ry] = await Promise.all([
      x.api.post('/api/v1/devices/claim', { serials: ['CONTESTED-1', 'X-ONLY-1'], model: 'LX-200' }),
      y.api.post('/api/v1/devices/claim', { serials: ['CONTESTED-1', 'Y-ONLY-1'], model: 'LX-200' }),
    ]);
    expect([rx.status, ry.status].sort()).toEqual([201, 422]);
    const loser = rx.status === 422 ? rx : ry;
    expect(loser.body.code).toBe('claim_rejected');
    expect(loser.body.offending_serials).toEqual([{ serial: 'CONTESTED-1', reason: 'already_claimed' }]);
  });
});
