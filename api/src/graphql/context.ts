import type { IncomingMessage } from 'node:http';
import type { Actor } from '../domain/shared/actor';
import { DomainError } from '../domain/shared/errors';
import type { Services } from '../services';
import type { User } from '../domain/accounts/user.service';
import { SESSION_COOKIE, CSRF_HEADER, readCookie } from '../../../rest-facade/src/authenticate';
import type { Loaders } from './loaders';
import type { LiveViews } from './live/live-views';

/** What every resolver gets: who is calling (scoped to one account), the services, per-request loaders. */
export interface GraphQLContext {
  actor: Actor;
  services: Services;
  loaders: Loaders;
  live: LiveViews;
  /** Set for portal users (session cookie). */
  user?: User;
  /** Session callers only: whether the request carried the right CSRF token (mutations need it). */
  csrfValid: boolean;
  /** API-key callers over HTTP: their requests per minute (mutation fields past the first cost more). */
  rateLimitPerMinute?: number;
}

export interface Caller {
  actor: Actor;
  user?: User;
  /** API-key callers: requests per minute (rate limited like REST). */
  rateLimitPerMinute?: number;
  csrfValid: boolean;
  /** Session token digest source, so a WebSocket can re-check the session later. */
  sessionToken?: string;
  apiKeySecret?: string;
}

/**
 * The same two ways in as REST (rest-facade/src/authenticate.ts): `Authorization: Bearer <key>`
 * or the portal's session cookie. Whether a cookie caller's CSRF token is right is recorded
 * here and enforced for mutations once the operation is known.
 */
export async function authenticateCaller(
  input: { authorization?: string | undefined; cookie?: string | undefined; csrfToken?: string | undefined },
  services: Pick<Services, 'apiKeys' | 'users'>,
): Promise<Caller> {
  if (input.authorization !== undefined && input.authorization !== '') {
    const match = /^Bearer\s+(\S+)$/i.exec(input.authorization);
    if (!match) throw new DomainError('unauthenticated', 'The authorization must be "Bearer <API key>".');
    const key = await services.apiKeys.authenticate(match[1]!);
    if (!key) throw new DomainError('unauthenticated', 'The API key is unknown or revoked.');
    return { actor: key.actor, rateLimitPerMinute: key.rateLimitPerMinute, csrfValid: true, apiKeySecret: match[1]! };
  }
  const token = readCookie(input.cookie, SESSION_COOKIE);
  if (token) {
    const session = await services.users.authenticateSession(token);
    if (!session) throw new DomainError('unauthenticated', 'The session has expired; log in again.');
    return { actor: session.actor, user: session.user, csrfValid: input.csrfToken === session.csrfToken, sessionToken: token };
  }
  throw new DomainError('unauthenticated', 'Send an API key as "Authorization: Bearer <API key>" or log in.');
}

export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export function httpCallerInput(req: IncomingMessage): { authorization?: string | undefined; cookie?: string | undefined; csrfToken?: string | undefined } {
  return {
    authorization: headerValue(req.headers.authorization),
    cookie: headerValue(req.headers.cookie),
    csrfToken: headerValue(req.headers[CSRF_HEADER]),
  };
}
