import type { ServiceDeps } from '../service-deps';
import type { UpdateLock, UpdateLockReason } from '#protocol/lock-payloads';
import { grantLock } from './update-locks';
import { readLockSubject, requeueSentUpdates, writeLock } from './store/update-locks.store';
import { appendEvents } from '../events/outbox';

/** What a device's lock message did. */
export interface LockOutcome {
  /** The device's lock after the message: null when it has none now (released, or none granted). */
  reason: UpdateLockReason | null;
  until: Date | null;
  /** The request was longer than the cap and cut to it. */
  capped: boolean;
  /** Deployments whose `sent` update of the device went back to queued (held). */
  requeued: string[];
}

/**
 * Stores a device's `ota/lock` message (docs/device-protocol.md "Update locks") in one
 * transaction: the lock granted (grantLock: cap, emergency recharge), and a command the device
 * has not started taken back. An update already under way (downloading, installing, rebooting)
 * is not held: it runs on under its deadline, so a device cannot keep an update open forever by
 * locking after starting it; the lock holds its next update. Null when the device is not the
 * account's (unclaimed meanwhile).
 */
export async function applyUpdateLock(
  deps: Pick<ServiceDeps, 'transaction' | 'clock'>,
  input: { accountId: string; deviceId: string; serial: string; message: UpdateLock },
): Promise<LockOutcome | null> {
  return deps.transaction(async (trx) => {
    const now = deps.clock.now();
    const subject = await readLockSubject(trx, input);
    if (!subject) return null;
    const { state, capped } = grantLock({
      now,
      message: input.message,
      emergency: subject.emergency,
      previousDurationTestAt: subject.durationTestAt,
    });
    await writeLock(trx, { accountId: input.accountId, deviceId: input.deviceId, state });
    const takenBack =
      state.until !== null && state.reason !== null
        ? await requeueSentUpdates(trx, {
            accountId: input.accountId,
            deviceId: input.deviceId,
            now,
            reason: state.reason,
          })
        : [];
    // Webhook consumers saw `sent`: they hear that the update waits again, and why.
    await appendEvents(
      trx,
      deps.clock,
      takenBack.map((u) => ({
        accountId: input.accountId,
        type: 'firmware.update.progress' as const,
        subject: input.serial,
        data: {
          serial: input.serial,
          device_id: input.deviceId,
          job_id: u.id,
          deployment_id: u.deploymentId,
          version: u.targetVersion,
          state: 'queued',
          progress: null,
          held: { reason: state.reason, until: state.until?.toISOString() ?? null },
        },
      })),
    );
    return {
      reason: state.reason,
      until: state.until,
      capped,
      requeued: [...new Set(takenBack.map((u) => u.deploymentId))],
    };
  });
}
