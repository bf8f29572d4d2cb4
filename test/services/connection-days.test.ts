import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '#core/shared/clock';
import { createLogger } from '#core/logger';
import { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import { startServiceHarness, type HarnessAccount, type ServiceHarness } from '../helpers/service-harness';
import { ifStarted } from '../helpers/teardown';

/**
 * Unexpected reboots and reconnects per firmware version (docs/fixture-health.md "Unexpected
 * reboots and reconnects"): counted by the heartbeat ingest's batched write into connection
 * days, judged against the days each version's devices were heard, tenant-isolated.
 */
describe('connection days: unexpected reboots and reconnects per firmware version', () => {
  let harness: ServiceHarness;
  let acme: HarnessAccount;
  let other: HarnessAccount;
  let ingest: HeartbeatIngest;
  const clock = new ManualClock(new Date('2026-11-20T10:00:00.000Z'));
  const ids = new Map<string, string>();

  beforeAll(async () => {
    harness = await startServiceHarness({ clock });
    acme = await harness.createAccount();
    other = await harness.createAccount();
    for (const acc of [acme, other])
      await harness.services.models.register(acc.admin, { name: 'LX-200', description: '' });
    await harness.services.claims.claim(acme.admin, { serials: ['CD-1', 'CD-2', 'CD-3'], model: 'LX-200' });
    await harness.services.claims.claim(other.admin, { serials: ['CD-X'], model: 'LX-200' });
    for (const serial of ['CD-1', 'CD-2', 'CD-3', 'CD-X'])
      ids.set(serial, (await harness.database.knex('devices').where({ serial }).first<{ id: string }>('id')).id);
    ingest = new HeartbeatIngest({
      presence: harness.services.presence,
      clock,
      logger: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'),
    });
  });
  afterAll(async () => ifStarted(harness)?.close());

  const beat = (serial: string, firmware: string, uptime_s: number) =>
    ingest.heartbeat(ids.get(serial)!, { firmware, uptime_s });
  const rates = (acc: HarnessAccount) =>
    harness.services.health.versionRates(acc.admin, {
      from: new Date('2026-11-20T00:00:00Z'),
      to: new Date('2026-11-23T00:00:00Z'),
    });

  it('counts an uptime that went back without an update as a reboot, and a new session of a known device as a reconnect', async () => {
    // Day 1: every device connects for the first time (not a reconnect) and reports.
    for (const serial of ['CD-1', 'CD-2', 'CD-3', 'CD-X']) ingest.sessionStarted(ids.get(serial)!);
    beat('CD-1', '1.0.0', 1000);
    beat('CD-2', '1.0.0', 1000);
    beat('CD-3', '2.0.0', 1000);
    beat('CD-X', '1.0.0', 1000);
    await ingest.flush();

    clock.advance(60_000);
    beat('CD-1', '1.0.0', 30); // rebooted: against the stored uptime
    ingest.sessionStarted(ids.get('CD-2')!); // reconnected
    beat('CD-2', '1.0.0', 1060);
    beat('CD-X', '1.0.0', 10); // another account's reboot
    // CD-3 reboots while an update is in progress: the update's own reboot, not counted.
    await harness.database
      .knex('devices')
      .where({ id: ids.get('CD-3') })
      .update({ current_update_id: randomUUID() });
    ingest.sessionStarted(ids.get('CD-3')!);
    beat('CD-3', '2.0.0', 5);
    await ingest.flush();
    await harness.database
      .knex('devices')
      .where({ id: ids.get('CD-3') })
      .update({ current_update_id: null });

    // Two heartbeats in one batch with a reboot between them (counted from memory).
    clock.advance(60_000);
    beat('CD-1', '1.0.0', 90);
    clock.advance(1000);
    beat('CD-1', '1.0.0', 2);
    await ingest.flush();

    // Day 2: a heard device makes a device-day; CD-2 is upgraded during the day (a day on each version).
    clock.set('2026-11-21T08:00:00.000Z');
    beat('CD-1', '1.0.0', 50_000);
    beat('CD-2', '1.0.0', 50_000);
    beat('CD-3', '2.0.0', 50_000);
    await ingest.flush();
    clock.advance(3_600_000);
    beat('CD-2', '2.0.0', 20);
    await ingest.flush();

    const acmeRates = await rates(acme);
    expect(acmeRates.map((r) => [r.firmware, r.devices, r.connectedDeviceDays])).toEqual([
      ['1.0.0', 2, 4],
      ['2.0.0', 2, 3],
    ]);
    const v1 = acmeRates[0]!;
    expect(v1.events).toMatchObject({ unexpected_reboots: 2, reconnects: 1 });
    expect(v1.per1000DeviceDays).toMatchObject({ unexpected_reboots: 500, reconnects: 250 });
    // No luminaire readings: those signals are not measured, and say so.
    expect(v1.deviceDays).toBe(0);
    expect(v1.per1000DeviceDays.thermal_derating).toBeNull();
    // The upgrade's reboot of CD-2 happened with no update in progress here (no deployment): it counts on 2.0.0.
    expect(acmeRates[1]!.events).toMatchObject({ unexpected_reboots: 1, reconnects: 0 });

    expect((await rates(other)).map((r) => [r.firmware, r.events.unexpected_reboots, r.connectedDeviceDays])).toEqual([
      ['1.0.0', 1, 1],
    ]);
  });

  it('a steady heartbeat writes no connection day', async () => {
    const count = async () =>
      Number(
        (await harness.database.knex('device_connection_days').count<{ count: string }[]>('* as count'))[0]!.count,
      );
    const before = await count();
    clock.advance(60_000);
    beat('CD-1', '1.0.0', 50_060);
    await ingest.flush();
    const row = await harness.database
      .knex('device_connection_days')
      .where({ device_id: ids.get('CD-1'), day: '2026-11-21' })
      .first<{ unexpected_reboots: number; reconnects: number }>();
    expect(await count()).toBe(before);
    expect(row).toMatchObject({ unexpected_reboots: 0, reconnects: 0 });
  });
});
