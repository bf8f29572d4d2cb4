import type { Knex } from 'knex';
import type { Actor } from '../shared/actor';
import { notFound } from '../shared/errors';
import type { ServiceDeps } from '../service-deps';
import {
  deleteExpiredWarrantyRecords,
  insertWarrantyRecord,
  selectFirmwareSpans,
  selectDeviceForWarranty,
  selectMonthlyEvidence,
  selectSucceededUpdates,
  selectWarrantySubjects,
} from './store/warranty.store';

/** How long the evidence of a device is kept for its owner after an unclaim. README "Retention". */
export interface WarrantyPolicy {
  /** Years (default 5). */
  years: number;
}
export const DEFAULT_WARRANTY: WarrantyPolicy = { years: 5 };

const num = (v: string | number | null | undefined): number => (v === null || v === undefined ? 0 : Number(v));

export interface WarrantyReport {
  serial: string;
  model: string;
  /** When this account claimed the device (the latest claim first when it owned it more than once). */
  claims: Array<{ claimedAt: string; unclaimedAt: string | null }>;
  claimDate: string;
  generatedAt: string;
  operatingHours: number | null;
  lifetimeEnergyKwh: number | null;
  firmwareHistory: Array<{ firmware: string | null; from: string; to: string; source: 'readings' | 'update' }>;
  /** Per UTC month: days with readings, energy and each fault counter's increase. */
  faultCounters: Array<{
    month: string;
    days: number;
    energyKwh: number;
    thermalDerating: number;
    thermalShutdown: number;
    supplyUndervoltage: number;
    supplyOvervoltage: number;
    sourceFailures: number;
    counterResets: number;
  }>;
  warrantyYears: number;
}

/**
 * Warranty evidence (docs/fixture-health.md "Warranty evidence"): the series are the daily
 * roll-ups, which carry the account that owned the device when the reading was taken and are kept
 * as long as the account; what an unclaim deletes (the device, its updates) is copied into
 * `warranty_records` at the unclaim and kept for the warranty period. An account sees only its
 * own days: a later owner's readings are not in its report, nor its in theirs.
 */
export class WarrantyService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly policy: WarrantyPolicy = DEFAULT_WARRANTY,
  ) {}

  async report(actor: Actor, input: { serial: string }): Promise<WarrantyReport> {
    const now = this.deps.clock.now();
    const subjects = await selectWarrantySubjects(this.deps.knex, {
      accountId: actor.accountId,
      serial: input.serial,
      now,
    });
    const first = subjects[0];
    if (!first) throw notFound('Device');
    const firmwareHistory: WarrantyReport['firmwareHistory'] = [];
    const months = new Map<string, WarrantyReport['faultCounters'][number]>();
    let hours: number | null = null;
    let energy: number | null = null;
    for (const s of subjects) {
      const updates =
        s.unclaimed_at === null ? await selectSucceededUpdates(this.deps.knex, { deviceId: s.device_id }) : [];
      for (const u of updates)
        firmwareHistory.push({
          firmware: u.target_version,
          from: new Date(u.finished_at).toISOString(),
          to: new Date(u.finished_at).toISOString(),
          source: 'update',
        });
      for (const f of s.firmware_history) firmwareHistory.push({ ...f, source: 'update' });
      for (const f of await selectFirmwareSpans(this.deps.knex, { accountId: actor.accountId, deviceId: s.device_id }))
        firmwareHistory.push({ ...f, source: 'readings' });
      for (const m of await selectMonthlyEvidence(this.deps.knex, {
        accountId: actor.accountId,
        deviceId: s.device_id,
      })) {
        const key = new Date(m.month).toISOString().slice(0, 7);
        const before = months.get(key);
        months.set(key, {
          month: key,
          days: (before?.days ?? 0) + num(m.days),
          energyKwh: Math.round(((before?.energyKwh ?? 0) + num(m.energy_wh) / 1000) * 1000) / 1000,
          thermalDerating: (before?.thermalDerating ?? 0) + num(m.gear_thermal_derating),
          thermalShutdown: (before?.thermalShutdown ?? 0) + num(m.gear_thermal_shutdown),
          supplyUndervoltage: (before?.supplyUndervoltage ?? 0) + num(m.supply_undervoltage),
          supplyOvervoltage: (before?.supplyOvervoltage ?? 0) + num(m.supply_overvoltage),
          sourceFailures: (before?.sourceFailures ?? 0) + num(m.source_failures),
          counterResets: (before?.counterResets ?? 0) + num(m.counter_resets),
        });
        if (m.lifetime_burn_s !== null) hours = Math.max(hours ?? 0, Math.round(num(m.lifetime_burn_s) / 36) / 100);
        if (m.lifetime_energy_wh !== null) energy = Math.max(energy ?? 0, Math.round(num(m.lifetime_energy_wh)) / 1000);
      }
    }
    firmwareHistory.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
    return {
      serial: first.serial,
      model: first.model,
      claims: subjects.map((s) => ({
        claimedAt: new Date(s.claimed_at).toISOString(),
        unclaimedAt: s.unclaimed_at ? new Date(s.unclaimed_at).toISOString() : null,
      })),
      claimDate: new Date(first.claimed_at).toISOString(),
      generatedAt: now.toISOString(),
      operatingHours: hours,
      lifetimeEnergyKwh: energy,
      firmwareHistory,
      faultCounters: [...months.values()].sort((a, b) => (a.month < b.month ? -1 : 1)),
      warrantyYears: this.policy.years,
    };
  }

  /**
   * Called inside the unclaim's transaction, before the device and its updates are deleted: keeps
   * what the owning account needs for a claim until the warranty period has passed.
   */
  async keepOnUnclaim(trx: Knex.Transaction, input: { accountId: string; deviceId: string }): Promise<void> {
    const now = this.deps.clock.now();
    const device = await selectDeviceForWarranty(trx, input);
    if (!device) return;
    const updates = await selectSucceededUpdates(trx, { deviceId: input.deviceId });
    const keepUntil = new Date(now);
    keepUntil.setUTCFullYear(keepUntil.getUTCFullYear() + this.policy.years);
    await insertWarrantyRecord(trx, {
      accountId: input.accountId,
      deviceId: input.deviceId,
      serial: device.serial,
      model: device.model,
      claimedAt: device.claimed_at,
      unclaimedAt: now,
      keepUntil,
      firmwareHistory: updates.map((u) => ({
        firmware: u.target_version,
        from: new Date(u.finished_at).toISOString(),
        to: new Date(u.finished_at).toISOString(),
      })),
    });
  }

  /** Housekeeping: warranty records past their period (the retention pass calls it). */
  pruneExpired(): Promise<number> {
    return deleteExpiredWarrantyRecords(this.deps.knex, this.deps.clock.now());
  }
}
