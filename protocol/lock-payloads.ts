import { z } from 'zod';

/**
 * Update locks (docs/device-protocol.md "Update locks"): a device says "not now" on
 * `devices/{serial}/ota/lock`, and the service holds its update until the lock ends. The length
 * is a duration counted from when the service receives the message, never an absolute time: a
 * fixture without a real-time clock (or with a drifting one) cannot name one reliably.
 */

/** Why a device cannot take an update now. Persisted and shown to operators: never rename one. */
export const UPDATE_LOCK_REASONS = ['emergency_test', 'recharging', 'occupied', 'other'] as const;
export type UpdateLockReason = (typeof UPDATE_LOCK_REASONS)[number];

/** Longest lock the service grants (seconds, 24 h); a longer request is cut to it and counted. */
export const MAX_UPDATE_LOCK_S = 86_400;
/**
 * EN 62034: an emergency luminaire recharges its battery for 24 h after a duration test before
 * the next one may run; an update in that time could leave it without the charge it needs.
 */
export const EMERGENCY_RECHARGE_S = 86_400;
/** Largest `for_s` accepted at all (about 68 years, a 32-bit integer); anything above it is invalid. */
const MAX_FOR_S = 2_147_483_647;

export const UpdateLockRequest = z
  .object({
    for_s: z
      .number()
      .int()
      .min(1)
      .max(MAX_FOR_S)
      .meta({
        description: `Seconds from now (the service's receipt) until the device may be updated. Above ${MAX_UPDATE_LOCK_S} the lock is cut to ${MAX_UPDATE_LOCK_S} s and the cut is counted.`,
      }),
    reason: z.enum(UPDATE_LOCK_REASONS),
    duration_test_ended_s_ago: z.number().int().min(0).max(MAX_UPDATE_LOCK_S).optional().meta({
      description:
        'Only with reason `emergency_test`: the device completed an emergency duration test this many seconds ago (0: just now). An emergency-lighting fixture is then held for at least 24 h after the test, whatever `for_s` says.',
    }),
  })
  .refine((m) => m.duration_test_ended_s_ago === undefined || m.reason === 'emergency_test', {
    message: 'duration_test_ended_s_ago comes only with reason emergency_test',
    path: ['duration_test_ended_s_ago'],
  });

export const UpdateLockRelease = z.object({ release: z.literal(true) });

/**
 * `devices/{serial}/ota/lock`: a lock (`for_s` and `reason`) or its early release
 * (`{"release": true}`). A newer lock replaces the one before (it may shorten it).
 */
export const UpdateLock = z.union([UpdateLockRelease, UpdateLockRequest]).meta({
  id: 'UpdateLock',
  description:
    'devices/{serial}/ota/lock: "not now". Either {"for_s", "reason", "duration_test_ended_s_ago"?} (a lock counted from receipt, at most 24 h) or {"release": true} (the lock ends now).',
});
export type UpdateLock = z.infer<typeof UpdateLock>;
export type UpdateLockRequest = z.infer<typeof UpdateLockRequest>;
