import type { IncomingMessage } from 'node:http';
import type { Actor } from '#core/shared/actor';
import { DomainError } from '#core/shared/errors';
import type { ApiKeyService } from '#core/accounts/api-key.service';
import type { User, UserService } from '#core/accounts/user.service';

export const SESSION_COOKIE = 'fleet_session';
export const CSRF_HEADER = 'x-csrf-token';

/** What a request presents: the Authorization value, the Cookie header, the CSRF header. */
export interface Credentials {
  authorization?: string | undefined;
  cookie?: string | undefined;
  csrfToken?: string | undefined;
}

/** Who is calling, as REST, GraphQL over HTTP and graphql-ws all see it. */
export interface Caller {
  actor: Actor;
  /** Set for portal users (session cookie). */
  user?: User;
  /** API-key callers: requests per minute. Session callers (the portal) are not limited per key. */
  rateLimitPerMinute?: number;
  /** Session callers: whether the request carried the session's CSRF token. API-key callers: always true. */
  csrfValid: boolean;
  /** The session token, so a long-lived connection (graphql-ws) can check the session again later. */
  sessionToken?: string;
  /** The API key, for the same re-check. */
  apiKeySecret?: string;
}

export interface CallerDeps {
  apiKeys: Pick<ApiKeyService, 'authenticate'>;
  users: Pick<UserService, 'authenticateSession'>;
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

export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The credentials of an HTTP request (or of a WebSocket upgrade request). */
export function credentialsOf(req: IncomingMessage): Credentials {
  return {
    authorization: headerValue(req.headers.authorization),
    cookie: headerValue(req.headers.cookie),
    csrfToken: headerValue(req.headers[CSRF_HEADER]),
  };
}

/**
 * The two ways in: `Authorization: Bearer <API key>`, or the portal's session cookie. A present
 * Authorization must be a Bearer key (a wrong scheme is refused, not ignored in favour of a
 * cookie). Whether a cookie caller's CSRF token is right is recorded in `csrfValid`; each
 * surface enforces it for what changes state (REST: unsafe methods, GraphQL: mutations).
 */
export async function authenticateCaller(credentials: Credentials, deps: CallerDeps): Promise<Caller> {
  const { authorization } = credentials;
  if (authorization !== undefined && authorization !== '') {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw new DomainError('unauthenticated', 'The Authorization header must be "Bearer <API key>".');
    const key = await deps.apiKeys.authenticate(match[1]!);
    if (!key) throw new DomainError('unauthenticated', 'The API key is unknown or revoked.');
    return { actor: key.actor, rateLimitPerMinute: key.rateLimitPerMinute, csrfValid: true, apiKeySecret: match[1]! };
  }
  const token = readCookie(credentials.cookie, SESSION_COOKIE);
  if (token) {
    const session = await deps.users.authenticateSession(token);
    if (!session) throw new DomainError('unauthenticated', 'The session has expired; log in again.');
    return {
      actor: session.actor,
      user: session.user,
      csrfValid: credentials.csrfToken === session.csrfToken,
      sessionToken: token,
    };
  }
  throw new DomainError('unauthenticated', 'Send an API key as "Authorization: Bearer <API key>" or log in.');
}

/** The credentials to authenticate a caller again (an open WebSocket re-checks periodically). */
export function credentialsToRecheck(caller: Caller): Credentials {
  return caller.apiKeySecret
    ? { authorization: `Bearer ${caller.apiKeySecret}` }
    : { cookie: `${SESSION_COOKIE}=${encodeURIComponent(caller.sessionToken ?? '')}` };
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** REST: a cookie-authenticated request that changes state must echo the session's CSRF token. */
export function requireCsrfFor(method: string, caller: Caller): void {
  if (!SAFE_METHODS.has(method) && !caller.csrfValid) {
    throw new DomainError('csrf_failed', 'Missing or wrong X-CSRF-Token header for a session request.');
  }
}
