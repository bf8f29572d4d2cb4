import { describe, it, expect } from 'vitest';
import { graceEndsAt, passwordVerdict, promotesNewCredential } from '#core/devices/credential-rotation-rules';
import { sha256Hex } from '#core/shared/secrets';

/** Which password a connection may use during a planned rotation (docs/device-protocol.md "Credentials rotation"). */
describe('password verdict during a planned rotation', () => {
  const current = sha256Hex('old-password');
  const next = sha256Hex('new-password');
  const started = new Date('2026-11-27T08:00:00.000Z');
  const ends = graceEndsAt(started, 3600);
  const pending = { rotationId: 'r-1', secretHash: next, graceEndsAt: ends };
  const at = (ms: number) => new Date(started.getTime() + ms);

  it.each([
    ['no rotation: the current password', current, null, at(0), 'current'],
    ['no rotation: another password', next, null, at(0), 'refused'],
    ['pending: the current password within the grace period', current, pending, at(3_599_999), 'current'],
    ['pending: the current password once the grace period ended', current, pending, at(3_600_000), 'refused'],
    ['pending: the new password at once', next, pending, at(0), 'pending'],
    ['pending: the new password after the grace period', next, pending, at(10 * 3_600_000), 'pending'],
    ['pending: neither', sha256Hex('guess'), pending, at(0), 'refused'],
  ] as const)('%s', (_name, presentedHash, pendingPassword, now, verdict) => {
    expect(passwordVerdict({ presentedHash, currentHash: current, pending: pendingPassword, now })).toBe(verdict);
  });

  it('ends the grace period graceS seconds after the start', () => {
    expect(ends.toISOString()).toBe('2026-11-27T09:00:00.000Z');
  });

  it('puts the new credential in place only for a confirmation or the end of the grace period', () => {
    expect(
      ['acknowledged', 'connected', 'grace_expired', 'replaced', 'revoked'].map((o) =>
        promotesNewCredential(o as never),
      ),
    ).toEqual([true, true, true, false, false]);
  });
});
