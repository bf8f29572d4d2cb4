import { z } from 'zod';
import type { ServiceDeps } from '../service-deps';
import { newId } from '../shared/ids';
import { DomainError } from '../shared/errors';
import { hashPassword, verifyPassword, DUMMY_PASSWORD_HASH, generateSecret, sha256Hex } from '../shared/secrets';
import { requireAdmin, type Actor, type Role } from '../shared/actor';
import { LoginThrottle } from './login-throttle';

export const CreateUserInput = z.object({
  email: z.string().trim().toLowerCase().email().max(254),
  password: z.string().min(8).max(200),
  role: z.enum(['admin', 'viewer']).default('viewer'),
});
export type CreateUserInput = z.input<typeof CreateUserInput>;

export const LoginInput = z.object({
  email: z.string().trim().toLowerCase().max(254),
  password: z.string().max(200),
});
export type LoginInput = z.infer<typeof LoginInput>;

export interface User {
  id: string;
  email: string;
  role: Role;
  createdAt: string;
}

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

interface UserRow {
  id: string;
  account_id: string;
  email: string;
  password_hash: string;
  role: Role;
  created_at: Date;
}

const toUser = (row: UserRow): User => ({
  id: row.id,
  email: row.email,
  role: row.role,
  createdAt: new Date(row.created_at).toISOString(),
});

export class UserService {
  private readonly throttle: LoginThrottle;

  constructor(private readonly deps: ServiceDeps) {
    this.throttle = new LoginThrottle(deps.knex);
  }

  async create(actor: Actor, raw: CreateUserInput): Promise<User> {
    requireAdmin(actor);
    const input = CreateUserInput.parse(raw);
    const taken = await this.deps.knex('users').where({ email: input.email }).first('id');
    if (taken) throw new DomainError('already_exists', 'A user with that e-mail exists already.', {
      errors: [{ field: 'email', message: 'is taken' }],
    });
    const row: UserRow = {
      id: newId(),
      account_id: actor.accountId,
      email: input.email,
      password_hash: await hashPassword(input.password),
      role: input.role,
      created_at: this.deps.clock.now(),
    };
    await this.deps.knex('users').insert(row);
    return toUser(row);
  }

  async list(actor: Actor): Promise<User[]> {
    requireAdmin(actor);
    const rows = (await this.deps.knex('users').where({ account_id: actor.accountId }).orderBy('created_at')) as UserRow[];
    return rows.map(toUser);
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
    const user = (await this.deps.knex('users').where({ email: input.email }).first()) as UserRow | undefined;
    const ok = await verifyPassword(input.password, user?.password_hash ?? DUMMY_PASSWORD_HASH);
    if (!user || !ok) throw new DomainError('invalid_credentials', 'E-mail or password is wrong.');
    await this.throttle.succeeded(attempt, now);
    const token = generateSecret('fls_');
    const csrfToken = generateSecret('');
    const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
    await this.deps.knex('sessions').insert({
      token_hash: sha256Hex(token),
      account_id: user.account_id,
      user_id: user.id,
      csrf_token: csrfToken,
      expires_at: expiresAt,
    });
    return { token, csrfToken, expiresAt: expiresAt.toISOString(), user: toUser(user), accountId: user.account_id };
  }

  /**
   * The account of a user whose password is still `password` (the operator's start-up check of
   * the demo login; no session, no throttle: it never answers a request).
   */
  async accountWithPassword(input: { email: string; password: string }): Promise<string | null> {
    const user = (await this.deps.knex('users').where({ email: input.email }).first('account_id', 'password_hash')) as Pick<UserRow, 'account_id' | 'password_hash'> | undefined;
    return user && (await verifyPassword(input.password, user.password_hash)) ? user.account_id : null;
  }

  async logout(token: string): Promise<void> {
    await this.deps.knex('sessions').where({ token_hash: sha256Hex(token) }).delete();
  }

  async authenticateSession(token: string): Promise<SessionActor | null> {
    if (!token.startsWith('fls_') || token.length > 200) return null;
    const row = (await this.deps
      .knex('sessions as s')
      .join('users as u', 'u.id', 's.user_id')
      .where('s.token_hash', sha256Hex(token))
      .where('s.expires_at', '>', this.deps.clock.now())
      .first('s.csrf_token', 's.expires_at', 'u.*')) as (UserRow & { csrf_token: string; expires_at: Date }) | undefined;
    if (!row) return null;
    return {
      actor: { accountId: row.account_id, role: row.role, principal: `user:${row.id}` },
      user: toUser(row),
      csrfToken: row.csrf_token,
      expiresAt: new Date(row.expires_at),
    };
  }
}
