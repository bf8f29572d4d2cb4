import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { ManualClock } from '#core/shared/clock';
import * as deviceHeardAt from '#migrations/20261127050000_device_heard_at';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { ifStarted } from '../helpers/teardown';

/**
 * The migration that splits the presence clock (`heard_at`) from `last_seen` starts `heard_at`
 * from `last_seen`, so a device online before the upgrade keeps its presence deadline: the
 * sweep after the upgrade neither drops it early nor keeps it for ever.
 */
describe('migration 20261127050000_device_heard_at', () => {
  let harness: ServiceHarness;
  let account: HarnessAccount;
  const clock = new ManualClock(new Date('2026-11-27T05:00:00.000Z'));

  beforeAll(async () => {
    harness = await startServiceHarness({ clock });
    account = await harness.createAccount();
    await harness.services.models.register(account.admin, { name: 'LX-200', description: '' });
    await harness.services.claims.claim(account.admin, { serials: ['MIG-1', 'MIG-2'], model: 'LX-200' });
  });
  afterAll(async () => ifStarted(harness)?.close());

  it('fills heard_at from last_seen; the sweep then keeps the deadline of the last sighting', async () => {
    const knex = harness.database.knex;
    // The schema as it was: no heard_at; two devices online as the old code left them, the
    // stored deadline a lower bound (60 s after the sighting), the exact one 180 s after it.
    await deviceHeardAt.down(knex);
    const seen = new Date('2026-11-27T04:59:00.000Z');
    await knex('devices')
      .where({ account_id: account.accountId })
      .update({ connectivity: 'online', status: 'online', last_seen: seen });
    // (Deadlines have since moved to their own table: migrations/20261128020000_presence_deadlines.ts.)
    const ids = await knex('devices').where({ account_id: account.accountId }).pluck<string[]>('id');
    await knex('device_presence_deadlines').insert(
      ids.map((id) => ({ device_id: id, offline_after: new Date(seen.getTime() + 60_000) })),
    );
    await knex('devices')
      .where({ serial: 'MIG-2' })
      .update({ last_seen: new Date('2026-11-27T04:50:00.000Z') });
    await deviceHeardAt.up(knex);

    const rows = await knex('devices')
      .where({ account_id: account.accountId })
      .orderBy('serial')
      .select<Array<{ serial: string; heard_at: Date; last_seen: Date }>>('serial', 'heard_at', 'last_seen');
    expect(rows.map((r) => [r.serial, new Date(r.heard_at).toISOString()])).toEqual([
      ['MIG-1', '2026-11-27T04:59:00.000Z'],
      ['MIG-2', '2026-11-27T04:50:00.000Z'],
    ]);

    // 100 s after MIG-1's sighting: past the stored lower bound, before the exact deadline.
    clock.set(new Date(seen.getTime() + 100_000));
    const swept = await harness.services.presence.sweepTimedOut();
    expect(swept.offline).toBe(1);
    const status = async (serial: string) => (await harness.services.devices.get(account.admin, { serial })).status;
    expect(await status('MIG-1')).toBe('online');
    expect(await status('MIG-2')).toBe('offline');
  });
});
