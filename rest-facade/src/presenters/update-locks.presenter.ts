import type { DeviceLockView } from '#core/deployments/update-lock.service';

export const presentDeviceLock = (v: DeviceLockView) => ({
  serial: v.serial,
  lock: v.lock
    ? { reason: v.lock.reason, until: v.lock.until, requested_until: v.lock.requestedUntil, set_at: v.lock.setAt }
    : null,
  last_duration_test_at: v.lastDurationTestAt,
  emergency_lighting: { ...v.emergencyLighting },
});
