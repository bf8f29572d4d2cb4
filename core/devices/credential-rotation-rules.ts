import { safeEqualHex } from '../shared/secrets';

/**
 * The rules of a planned credential rotation (docs/device-protocol.md "Credentials rotation"),
 * without a database or a clock of their own.
 */

/** What a rotation replaces. Persisted values: never rename. */
export const ROTATION_KINDS = ['password', 'certificate'] as const;
export type RotationKind = (typeof ROTATION_KINDS)[number];

/**
 * How a rotation ended. Persisted values: never rename.
 * - `acknowledged`: the device confirmed the new password on `credentials/ack`;
 * - `connected`: the device connected with the new password or certificate;
 * - `grace_expired`: the grace period ended first (the new credential stays, the old one is refused);
 * - `replaced`: a newer planned rotation of the same password took its place;
 * - `revoked`: an emergency rotation (or an unclaim) ended it; its new credential never becomes valid.
 */
export const ROTATION_OUTCOMES = ['acknowledged', 'connected', 'grace_expired', 'replaced', 'revoked'] as const;
export type RotationOutcome = (typeof ROTATION_OUTCOMES)[number];

/** Outcomes that make the new credential the device's only one (the others drop it). */
export function promotesNewCredential(outcome: RotationOutcome): boolean {
  switch (outcome) {
    case 'acknowledged':
    case 'connected':
    case 'grace_expired':
      return true;
    case 'replaced':
    case 'revoked':
      return false;
  }
}

/** When a rotation started at `now` with `graceS` seconds of grace stops accepting the old credential. */
export function graceEndsAt(now: Date, graceS: number): Date {
  return new Date(now.getTime() + graceS * 1000);
}

/** The pending password of an open rotation, as the credential lookup reads it. */
export interface PendingPassword {
  rotationId: string;
  secretHash: string;
  graceEndsAt: Date;
}

/**
 * Which of a device's passwords a connection presented (their SHA-256, lowercase hex): the
 * current one, accepted unless a pending one exists whose grace period is over; the pending one,
 * accepted from the start (the device may have stored it and rebooted before acknowledging);
 * or neither. Both are compared in constant time whatever the first compare found.
 */
export function passwordVerdict(input: {
  presentedHash: string;
  currentHash: string;
  pending: PendingPassword | null;
  now: Date;
}): 'current' | 'pending' | 'refused' {
  const { presentedHash, currentHash, pending, now } = input;
  const isCurrent = safeEqualHex(presentedHash, currentHash);
  const isPending = pending !== null && safeEqualHex(presentedHash, pending.secretHash);
  if (isPending) return 'pending';
  if (isCurrent && (pending === null || now.getTime() < pending.graceEndsAt.getTime())) return 'current';
  return 'refused';
}
