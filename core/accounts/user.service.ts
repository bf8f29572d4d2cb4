import { z } from 'zod';
import type { ServiceDeps } from '../service-deps';
import { newId } from '../shared/ids';
import { DomainError } from '../shared/errors';
import { hashPassword, verifyPassword, DUMMY_PASSWORD_HASH, generateSecret, sha256Hex } from '../shared/secrets';
import { requireAdmin, type Actor } from '../shared/actor';
import { LoginThrottle } from './login-throttle';
import type { User } from './account-types';
import { findPasswordByEmail, findUserByEmail, insertUser, isEmailTaken, listUsers } from './store/users.store';
import { deleteSession, findLiveSession, insertSession } from './store/sessions.store';

export type { User } from './account-types';

export const CreateUserInput = z.object({
  email: z.string().trim().toLowerCase().pipe(z.email().max(254)),
  password: z.string().min(8).max(200),
  role: z.enum(['admin', 'viewer']).default('viewer'),
});
export type CreateUserInput = z.input<typeof CreateUserInput>;

export const LoginInput = z.object({
  email: z.string().trim().toLowerCase().max(254),
  password: z.string().max(200),
});
export type LoginInput = z.infer<typeof LoginInput>;

export interface Session {
  /** Opaque token for the httpOnly cookie; only its digest is stored. */
  token: string;
  csrfToken: string;
  expiresAt: string;
  user: User;
  accountId: string;
}

export interface SessionActor {
  actor: Actor;
  user: User;
  csrfToken: string;
  expiresAt: Date;
}

/** Sessions last 12 hours from login. */
export const SESSION_TTL_MS = 12 * 60 * 60_000;

export class UserService {
  private readonly throttle: LoginThrottle;

  constructor(private readonly deps: ServiceDeps) {
    this.throttle = new LoginThrottle(deps.knex);
  }

  async create(actor: Actor, raw: CreateUserInput): Promise<User> {
    requireAdmin(actor);
    const input = CreateUserInput.parse(raw);
    if (await isEmailTaken(this.deps.knex, input.email))
      throw new DomainError('already_exists', 'A user with that e-mail exists already.', {
        errors: [{ field: 'email', message: 'is taken' }],
      });
    const user = { id: newId(), email: input.email, role: input.role, createdAt: this.deps.clock.now() };
    await insertUser(this.deps.knex, {
      ...user,
      accountId: actor.accountId,
      passwordHash: await hashPassword(input.password),
    });
    return { ...user, createdAt: user.createdAt.toISOString() };
  }

  async list(actor: Actor): Promise<User[]> {
    requireAdmin(actor);
    return listUsers(this.deps.knex, actor.accountId);
  }

  /**
   * Email and password to a session. Unknown e-mail and wrong password give the same error
   * and take the same time; attempts are throttled per e-mail string (whether or not it exists)
   * and client address (`req.ip`), see LoginThrottle.
   */
  async login(raw: LoginInput, context: { clientAddress: string | undefined }): Promise<Session> {
    const input = LoginInput.parse(raw);
    const now = this.deps.clock.now();
    const attempt = await this.throttle.admit({ email: input.email, clientAddress: context.clientAddress, now });
    const found = await findUserByEmail(this.deps.knex, input.email);
    const ok = await verifyPassword(input.password, found?.passwordHash ?? DUMMY_PASSWORD_HASH);
    if (!found || !ok) throw new DomainError('invalid_credentials', 'E-mail or password is wrong.');
    await this.throttle.succeeded(attempt, now);
    const token = generateSecret('fls_');
    const csrfToken = generateSecret('');
    const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
    await insertSession(this.deps.knex, {
      tokenHash: sha256Hex(token),
      accountId: found.accountId,
      userId: found.user.id,
      csrfToken,
      expiresAt,
    });
    return { token, csrfToken, expiresAt: expiresAt.toISOString(), user: found.user, accountId: found.accountId };
  }

  /**
   * The account of a user whose password is still `password` (the operator's start-up check of
   * the demo login; no session, no throttle: it never answers a request).
   */
  async accountWithPassword(input: { email: string; password: string }): Promise<string | null> {
    const found = await findPasswordByEmail(this.deps.knex, input.email);
    return found && (await verifyPassword(input.password, found.passwordHash)) ? found.accountId : null;
  }

  async logout(token: string): Promise<void> {
    await deleteSession(this.deps.knex, sha256Hex(token));
  }

  async authenticateSession(token: string): Promise<SessionActor | null> {
    if (!token.startsWith('fls_') || token.length > 200) return null;
    const session = await findLiveSession(this.deps.knex, { tokenHash: sha256Hex(token), now: this.deps.clock.now() });
    if (!session) return null;
    return {
      actor: { accountId: session.accountId, role: session.user.role, principal: `user:${session.user.id}` },
      user: session.user,
      csrfToken: session.csrfToken,
      expiresAt: session.expiresAt,
    };
  }
}
