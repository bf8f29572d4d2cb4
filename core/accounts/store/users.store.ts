import type { Role } from '../../shared/actor';
import type { User } from '../account-types';
import type { Db } from '../../db/db';

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

/** A user with what a login checks. */
export interface UserCredentials {
  user: User;
  accountId: string;
  passwordHash: string;
}

export async function isEmailTaken(db: Db, email: string): Promise<boolean> {
  return (await db('users').where({ email }).first('id')) !== undefined;
}

export interface NewUser {
  id: string;
  accountId: string;
  email: string;
  passwordHash: string;
  role: Role;
  /** Omitted: the database's default (the time of the insert). */
  createdAt?: Date;
}

export async function insertUser(db: Db, user: NewUser): Promise<void> {
  await db('users').insert({
    id: user.id,
    account_id: user.accountId,
    email: user.email,
    password_hash: user.passwordHash,
    role: user.role,
    ...(user.createdAt ? { created_at: user.createdAt } : {}),
  });
}

export async function listUsers(db: Db, accountId: string): Promise<User[]> {
  const rows = (await db('users').where({ account_id: accountId }).orderBy('created_at')) as UserRow[];
  return rows.map(toUser);
}

export async function findUserByEmail(db: Db, email: string): Promise<UserCredentials | null> {
  const row = (await db('users').where({ email }).first()) as UserRow | undefined;
  return row ? { user: toUser(row), accountId: row.account_id, passwordHash: row.password_hash } : null;
}

/** The account and password hash only (no user record): the operator's check of the demo login. */
export async function findPasswordByEmail(
  db: Db,
  email: string,
): Promise<{ accountId: string; passwordHash: string } | null> {
  const row = await db('users')
    .where({ email })
    .first<Pick<UserRow, 'account_id' | 'password_hash'> | undefined>('account_id', 'password_hash');
  return row ? { accountId: row.account_id, passwordHash: row.password_hash } : null;
}
