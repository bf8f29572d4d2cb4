import type { Session, SessionActor } from '#core/accounts/user.service';

/**
 * A session just opened (login) or the one of a request's cookie -> wire format (snake_case).
 * The cookie token is never part of it (it travels in Set-Cookie only).
 */
export const presentSession = (s: Session | SessionActor) => ({
  user: { id: s.user.id, email: s.user.email, role: s.user.role },
  account_id: 'actor' in s ? s.actor.accountId : s.accountId,
  csrf_token: s.csrfToken,
  expires_at: s.expiresAt instanceof Date ? s.expiresAt.toISOString() : s.expiresAt,
});
