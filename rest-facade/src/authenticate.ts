import type { Request } from 'express';
import type { Actor } from '../../api/src/domain/shared/actor';
import { DomainError } from '../../api/src/domain/shared/errors';
import type { ApiKeyService } from '../../api/src/domain/accounts/api-key.service';
import type { UserService } from '../../api/src/domain/accounts/user.service';

export const SESSION_COOKIE = 'fleet_session';
export const CSRF_HEADER = 'x-csrf-token';

export interface HttpCaller {
  actor: Actor;
  /** Set for API-key callers; session callers (the portal) are not rate limited per key. */
  rateLimitPerMinute?: number;
}

/**
 * The decoded value of one cookie, or undefined. A value that is not valid percent-encoding
 * was never set by us (session tokens are URL-safe): it counts as no cookie, so the caller is
 * simply unauthenticated instead of the decoder's URIError becoming a 500.
 */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Bearer API key, or the portal's session cookie. Cookie-authenticated requests that change
 * state must echo the session's CSRF token in X-CSRF-Token (the cookie is also SameSite=Lax).
 */
export async function authenticateRequest(
  req: Request,
  deps: { apiKeys: ApiKeyService; users: UserService },
): Promise<HttpCaller> {
  const header = req.headers.authorization;
  if (header !== undefined) {
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match) throw new DomainError('unauthenticated', 'The Authorization header must be "Bearer <API key>".');
    const key = await deps.apiKeys.authenticate(match[1]!);
    if (!key) throw new DomainError('unauthenticated', 'The API key is unknown or revoked.');
    return { actor: key.actor, rateLimitPerMinute: key.rateLimitPerMinute };
  }
  const token = readCookie(req.headers.cookie, SESSION_COOKIE);
  if (token) {
    const session = await deps.users.authenticateSession(token);
    if (!session) throw new DomainError('unauthenticated', 'The session has expired; log in again.');
    if (!SAFE_METHODS.has(req.method) && req.headers[CSRF_HEADER] !== session.csrfToken) {
      throw new DomainError('csrf_failed', 'Missing or wrong X-CSRF-Token header for a session request.');
    }
    return { actor: session.actor };
  }
  throw new DomainError('unauthenticated', 'Send an API key as "Authorization: Bearer <API key>".');
}
