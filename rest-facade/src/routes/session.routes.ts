import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { LoginInput, SESSION_TTL_MS } from '#core/accounts/user.service';
import { SESSION_COOKIE, readCookie } from '#edge/caller';
import { DomainError } from '#core/shared/errors';
import { SessionSchema } from '../schemas/session.schemas';
import { presentSession } from '../presenters/session.presenter';

/** Portal login: an httpOnly, SameSite=Lax session cookie plus a CSRF token for writes. */
export function sessionRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/session',
      operationId: 'login',
      summary: 'Log in with manufacturer credentials (portal); sets the session cookie',
      tag: 'Session',
      auth: 'public',
      body: LoginInput,
      responses: { 201: { description: 'Logged in', schema: SessionSchema } },
      handler: async ({ body, req, res }) => {
        // req.ip honours X-Forwarded-For only from a loopback proxy (http-server.ts, trust proxy).
        const session = await services.users.login(body, { clientAddress: req.ip });
        const secure = req.secure ? '; Secure' : '';
        res.setHeader(
          'Set-Cookie',
          `${SESSION_COOKIE}=${encodeURIComponent(session.token)}; HttpOnly; SameSite=Lax; Path=/; Max-Age=${SESSION_TTL_MS / 1000}${secure}`,
        );
        return { status: 201, body: presentSession(session) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/session',
      operationId: 'getSession',
      summary: 'The current portal session (user, role, CSRF token)',
      tag: 'Session',
      auth: 'public',
      responses: { 200: { description: 'The session', schema: SessionSchema } },
      handler: async ({ req }) => {
        const token = readCookie(req.headers.cookie, SESSION_COOKIE);
        const session = token ? await services.users.authenticateSession(token) : null;
        if (!session) throw new DomainError('unauthenticated', 'Not logged in.');
        return { status: 200, body: presentSession(session) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/session',
      operationId: 'logout',
      summary: 'Log out (ends the session)',
      tag: 'Session',
      auth: 'public',
      responses: { 204: { description: 'Logged out' } },
      handler: async ({ req, res }) => {
        const token = readCookie(req.headers.cookie, SESSION_COOKIE);
        if (token) await services.users.logout(token);
        res.setHeader('Set-Cookie', `${SESSION_COOKIE}=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0`);
        return { status: 204 };
      },
    }),
  ];
}
