import type { ServiceDeps } from '../service-deps';
import { requireAdmin, type Actor } from '../shared/actor';
import { notFound } from '../shared/errors';
import { readDeviceLock, writeDeviceEmergencyFlag, writeModelEmergencyFlag } from './store/update-locks.store';
import { holdOf, type HoldReason } from './update-locks';

/** A device's update lock as operators see it (docs/ota.md "Update locks"). */
export interface DeviceLockView {
  serial: string;
  /** The lock in force now (null: none, or it ended). */
  lock: { reason: HoldReason; until: string; requestedUntil: string | null; setAt: string | null } | null;
  lastDurationTestAt: string | null;
  /** The device's own flag (null: its model's), its model's, and what applies. */
  emergencyLighting: { device: boolean | null; model: boolean; effective: boolean };
}

const iso = (v: Date | null): string | null => (v === null ? null : new Date(v).toISOString());

/**
 * Reading a device's update lock, and the emergency-lighting flags (a model's, a device's
 * override) that decide the EN 62034 24 h rule. Locks themselves come from devices (MQTT).
 */
export class UpdateLockService {
  constructor(private readonly deps: ServiceDeps) {}

  async get(actor: Actor, input: { serial: string }): Promise<DeviceLockView> {
    const row = await readDeviceLock(this.deps.knex, { accountId: actor.accountId, serial: input.serial });
    if (!row) throw notFound('Device');
    const until = row.until === null ? null : new Date(row.until);
    const hold = holdOf(
      { lockUntil: until, lockReason: row.reason, siteTimeZone: null, siteFreezes: null },
      this.deps.clock.now(),
    );
    return {
      serial: row.serial,
      lock: hold
        ? {
            reason: hold.reason,
            until: hold.until!.toISOString(),
            requestedUntil: iso(row.requested_until),
            setAt: iso(row.set_at),
          }
        : null,
      lastDurationTestAt: iso(row.duration_test_at),
      emergencyLighting: {
        device: row.device_flag,
        model: row.model_flag,
        effective: row.device_flag ?? row.model_flag,
      },
    };
  }

  /** The device's own flag; null falls back to its model's. Applies from the device's next lock message. */
  async setDeviceEmergency(
    actor: Actor,
    input: { serial: string; emergencyLighting: boolean | null },
  ): Promise<DeviceLockView> {
    requireAdmin(actor);
    const value = input.emergencyLighting;
    const found = await writeDeviceEmergencyFlag(this.deps.knex, {
      accountId: actor.accountId,
      serial: input.serial,
      value,
    });
    if (!found) throw notFound('Device');
    return this.get(actor, { serial: input.serial });
  }

  async setModelEmergency(
    actor: Actor,
    input: { name: string; emergencyLighting: boolean },
  ): Promise<{ model: string; emergencyLighting: boolean }> {
    requireAdmin(actor);
    const value = input.emergencyLighting;
    const found = await writeModelEmergencyFlag(this.deps.knex, {
      accountId: actor.accountId,
      name: input.name,
      value,
    });
    if (!found) throw notFound('Model');
    return { model: input.name, emergencyLighting: value };
  }
}
