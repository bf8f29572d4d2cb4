import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { HarnessAccount, ServiceHarness } from '../helpers/service-harness';
import { startLuminaireHarness, type LuminaireHarness } from '../helpers/luminaire-harness';
import { ifStarted } from '../helpers/teardown';
import { ManualClock } from '#core/shared/clock';
import type { LuminaireBucket } from '#core/luminaire/luminaire-types';

/**
 * Luminaire data over a test database (docs/luminaire-data.md): what a reading stores, counter
 * resets, bad clocks, refused fields, attribution of roll-ups to what the device was, expiry by
 * dropping partitions, and tenant isolation of the reads.
 */
describe('luminaire series', () => {
  const clock = new ManualClock('2026-11-27T10:00:00Z');
  let harness: ServiceHarness;
  let acme: HarnessAccount;
  let other: HarnessAccount;
  let ids: Map<string, string>;
  /** A message as the broker hands it on: read at the service's clock, then recorded. */
  let send: LuminaireHarness['send'];

  beforeAll(async () => {
    const lux = await startLuminaireHarness({ clock, serials: [['L-1', 'L-2', 'L-3'], ['O-1']] });
    ({ harness, ids, send } = lux);
    [acme, other] = lux.accounts as [HarnessAccount, HarnessAccount];
  });
  afterAll(async () => ifStarted(harness)?.close());

  const at = (minutes: number) => new Date(clock.now().getTime() + minutes * 60_000).toISOString();
  /** Moves the clock to `time`, then sends a reading taken now. */
  const sendAt = (acc: HarnessAccount, serial: string, time: string, payload: Record<string, unknown>) => {
    clock.set(time);
    return send(acc, serial, { at: clock.now().toISOString(), ...payload });
  };

  it('stores every reading, records valid fields and counts each refused field with its reason', async () => {
    await send(acme, 'L-1', { at: at(0), power_w: 40.5, energy_wh: 1000, output_level_pct: 80, source_on_s: 3600 });
    await send(acme, 'L-1', {
      at: at(1),
      power_w: -3,
      output_level_pct: 140,
      gear_starts: 1.5,
      energy_wh: 'lots',
      gear_temp_c: 51,
    });
    const raw = await harness.services.luminaire.series(acme.admin, {
      serial: 'L-1',
      from: new Date('2026-11-27T09:00:00Z'),
      to: new Date('2026-11-27T11:00:00Z'),
      resolution: 'raw',
    });
    expect(raw.points).toEqual([
      {
        at: '2026-11-27T10:00:00.000Z',
        badClock: false,
        power_w: 40.5,
        energy_wh: 1000,
        lifetime_energy_wh: 1000,
        output_level_pct: 80,
        source_on_s: 3600,
      },
      { at: '2026-11-27T10:01:00.000Z', badClock: false, gear_temp_c: 51 },
    ]);
    const summary = await harness.services.luminaire.summary(acme.admin, { deviceId: ids.get('L-1')! });
    expect(summary?.refusedFields).toMatchObject({
      power_w: { count: 1, reason: 'out_of_range', value: '-3' },
      output_level_pct: { count: 1, reason: 'out_of_range', value: '140' },
      gear_starts: { count: 1, reason: 'not_an_integer', value: '1.5' },
      energy_wh: { count: 1, reason: 'wrong_type', value: 'lots' },
    });
    expect(summary?.latest).toMatchObject({ power_w: 40.5, gear_temp_c: 51, output_level_pct: 80 });
    expect(summary?.points).toBe(2);
  });

  it('starts a new segment when a counter goes down: no negative delta, lifetime figures keep growing', async () => {
    await sendAt(acme, 'L-2', '2026-11-27T10:00:00Z', { energy_wh: 5000, source_on_s: 7200, gear_starts: 10 });
    await sendAt(acme, 'L-2', '2026-11-27T10:10:00Z', { energy_wh: 5040, source_on_s: 7800, gear_starts: 11 });
    // The driver was replaced: its counters start again.
    await sendAt(acme, 'L-2', '2026-11-27T10:20:00Z', { energy_wh: 15, source_on_s: 300, gear_starts: 1 });
    await sendAt(acme, 'L-2', '2026-11-27T10:30:00Z', { energy_wh: 45, source_on_s: 900, gear_starts: 1 });
    clock.set('2026-11-27T10:00:00Z');
    const hour = await harness.services.luminaire.series(acme.admin, {
      serial: 'L-2',
      from: new Date('2026-11-27T10:00:00Z'),
      to: new Date('2026-11-27T11:00:00Z'),
      resolution: 'hour',
    });
    const bucket = hour.points[0] as LuminaireBucket;
    expect(bucket).toMatchObject({
      points: 4,
      energyWh: 40 + 15 + 30,
      gearStarts: 1 + 1,
      counterResets: 1,
      lifetimeEnergyWh: 5040 + 45,
    });
    expect(bucket.burnHours).toBeCloseTo((7800 + 900) / 3600);
    const summary = await harness.services.luminaire.summary(acme.admin, { deviceId: ids.get('L-2')! });
    expect(summary).toMatchObject({ lifetimeEnergyKwh: 5.085, counterResets: 1 });
    expect(summary?.burnHours).toBeCloseTo(8700 / 3600);
  });

  it('stamps a reading from a bad clock (or none) with the time of receipt and counts the device', async () => {
    await send(acme, 'L-3', { at: '2001-01-01T00:00:00Z', power_w: 10 });
    await send(acme, 'L-3', { at: at(6), power_w: 11 }); // 6 minutes ahead: over the 300 s tolerance
    await send(acme, 'L-3', { at: at(4), power_w: 12 }); // within it
    clock.advance(1000);
    await send(acme, 'L-3', { power_w: 13 });
    const raw = await harness.services.luminaire.series(acme.admin, {
      serial: 'L-3',
      from: new Date('2026-11-27T09:00:00Z'),
      to: new Date('2026-11-27T11:00:00Z'),
      resolution: 'raw',
    });
    // The first two arrived in the same millisecond: receipt times of a device never repeat.
    expect(
      raw.points.map((p) => [p.at, (p as { badClock: boolean }).badClock, (p as { power_w: number }).power_w]),
    ).toEqual([
      ['2026-11-27T10:00:00.000Z', true, 10],
      ['2026-11-27T10:00:00.001Z', true, 11],
      ['2026-11-27T10:00:01.000Z', true, 13],
      ['2026-11-27T10:04:00.000Z', false, 12],
    ]);
    const summary = await harness.services.luminaire.summary(acme.admin, { deviceId: ids.get('L-3')! });
    expect(summary?.badClockCount).toBe(3);
    expect(summary?.lastBadClockAt).toBe('2026-11-27T10:00:01.000Z');
  });

  it('attributes energy to what the device was at reading time: a later upgrade or re-tag does not rewrite history', async () => {
    const knex = harness.database.knex;
    await knex('devices')
      .where({ id: ids.get('L-1') })
      .update({ firmware: '1.0.0', tags: JSON.stringify({ floor: '3' }) });
    await sendAt(acme, 'L-1', '2026-11-28T08:00:00Z', { energy_wh: 1100 });
    await sendAt(acme, 'L-1', '2026-11-28T09:00:00Z', { energy_wh: 1300 });
    await knex('devices')
      .where({ id: ids.get('L-1') })
      .update({ firmware: '2.0.0', tags: JSON.stringify({ floor: '4' }) });
    await sendAt(acme, 'L-1', '2026-11-29T08:00:00Z', { energy_wh: 1400 });
    await sendAt(acme, 'L-1', '2026-11-29T09:00:00Z', { energy_wh: 1450 });
    const byFirmware = await harness.services.luminaire.fleetEnergy(acme.admin, {
      from: '2026-11-28',
      to: '2026-11-29',
      groupBy: { by: 'firmware' },
    });
    expect(byFirmware.days).toEqual(['2026-11-28', '2026-11-29']);
    const kwh = Object.fromEntries(
      byFirmware.groups.map((g) => [g.key, g.kwh.map((v) => Math.round(v * 1000) / 1000)]),
    );
    // 1100 - 1000 = 100 Wh and 200 Wh on the 28th under 1.0.0; 100 and 50 on the 29th under 2.0.0.
    expect(kwh).toEqual({ '1.0.0': [0.3, 0], '2.0.0': [0, 0.15] });
    const byFloor = await harness.services.luminaire.fleetEnergy(acme.admin, {
      from: '2026-11-28',
      to: '2026-11-29',
      groupBy: { by: 'tag', key: 'floor' },
    });
    expect(Object.fromEntries(byFloor.groups.map((g) => [g.key, Math.round(g.totalKwh * 1000) / 1000]))).toEqual({
      '3': 0.3,
      '4': 0.15,
    });
    const byModel = await harness.services.luminaire.fleetEnergy(acme.admin, {
      from: '2026-11-28',
      to: '2026-11-29',
      groupBy: { by: 'model' },
    });
    expect(byModel.groups.map((g) => g.key)).toEqual(['LX-200']);
  });

  it('answers an upgrade inside the hour as one bucket: sums, extremes and averages over both firmware versions', async () => {
    const knex = harness.database.knex;
    await knex('devices')
      .where({ id: ids.get('L-2') })
      .update({ firmware: '1.0.0' });
    // L-2's energy counter stood at 45 Wh: 0, 20 and 30 Wh more.
    await sendAt(acme, 'L-2', '2026-11-30T10:05:00Z', { energy_wh: 45, power_w: 10, supply_voltage_v: 230 });
    await sendAt(acme, 'L-2', '2026-11-30T10:15:00Z', { energy_wh: 65, power_w: 20, supply_voltage_v: 228 });
    await knex('devices')
      .where({ id: ids.get('L-2') })
      .update({ firmware: '2.0.0' });
    await sendAt(acme, 'L-2', '2026-11-30T10:25:00Z', { energy_wh: 95, power_w: 60, supply_voltage_v: 235 });
    for (const resolution of ['hour', 'day'] as const) {
      const series = await harness.services.luminaire.series(acme.admin, {
        serial: 'L-2',
        from: new Date('2026-11-30T00:00:00Z'),
        to: new Date('2026-12-01T00:00:00Z'),
        resolution,
      });
      expect(series.points, resolution).toHaveLength(1);
      expect(series.points[0], resolution).toMatchObject({
        at: resolution === 'hour' ? '2026-11-30T10:00:00.000Z' : '2026-11-30T00:00:00.000Z',
        points: 3,
        energyWh: 50,
        powerAvgW: 30,
        powerMaxW: 60,
        supplyVoltageMinV: 228,
        supplyVoltageMaxV: 235,
        gearTempAvgC: null,
        counterResets: 0,
      });
    }
  });

  it("keeps every account's data to itself", async () => {
    await send(other, 'O-1', { at: at(0), energy_wh: 1, power_w: 99 });
    await expect(harness.services.luminaire.series(acme.admin, { serial: 'O-1' })).rejects.toMatchObject({
      code: 'not_found',
    });
    await expect(harness.services.luminaire.live(acme.admin, { serial: 'O-1' })).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(await harness.services.luminaire.summary(acme.admin, { deviceId: ids.get('O-1')! })).toBeNull();
    const energy = await harness.services.luminaire.fleetEnergy(other.admin, {
      from: '2026-11-27',
      to: '2026-11-29',
      groupBy: { by: 'firmware' },
    });
    expect(energy.groups.every((g) => g.totalKwh === 0)).toBe(true);
  });

  it('expires raw readings by dropping whole daily partitions; hourly and daily roll-ups stay', async () => {
    const partitions = async () =>
      (
        await harness.database.knex.raw<{ rows: Array<{ name: string }> }>(
          `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'luminaire_points'::regclass ORDER BY 1`,
        )
      ).rows.map((r) => r.name);
    expect(await partitions()).toContain('luminaire_points_p20261127');
    clock.set('2026-12-28T00:30:00Z');
    const pass = await harness.services.luminairePartitions.maintain();
    // 30 days: the 27th ended 30 days and a half hour ago; the 28th has not.
    expect(pass.dropped).toEqual(['luminaire_points_p20261127']);
    expect(await partitions()).not.toContain('luminaire_points_p20261127');
    expect(await partitions()).toContain('luminaire_points_p20261230');
    const raw = await harness.services.luminaire.series(acme.admin, {
      serial: 'L-2',
      from: new Date('2026-11-27T00:00:00Z'),
      to: new Date('2026-11-28T00:00:00Z'),
      resolution: 'raw',
    });
    expect(raw.points).toEqual([]);
    const hourly = await harness.services.luminaire.series(acme.admin, {
      serial: 'L-2',
      from: new Date('2026-11-27T00:00:00Z'),
      to: new Date('2026-11-28T00:00:00Z'),
      resolution: 'hour',
    });
    expect(hourly.points).toHaveLength(1);
  });
});
