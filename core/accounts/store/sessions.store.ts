import type { Role } from '../../shared/actor';
import type { User } from '../account-types';
import type { Db } from '../../db/db';

interface SessionUserRow {
  id: string;
  account_id: string;
  email: string;
  role: Role;
  created_at: Date;
  csrf_token: string;
  expires_at: Date;
}

/** An unexpired session with its user. */
export interface LiveSession {
  user: User;
  accountId: string;
  csrfToken: string;
  expiresAt: Date;
}

const toLiveSession = (row: SessionUserRow): LiveSession => ({
  user: { id: row.id, email: row.email, role: row.role, createdAt: new Date(row.created_at).toISOString() },
  accountId: row.account_id,
  csrfToken: row.csrf_token,
  expiresAt: new Date(row.expires_at),
});

export async function insertSession(
  db: Db,
  session: { tokenHash: string; accountId: string; userId: string; csrfToken: string; expiresAt: Date },
): Promise<void> {
  await db('sessions').insert({
    token_hash: session.tokenHash,
    account_id: session.accountId,
    user_id: session.userId,
    csrf_token: session.csrfToken,
    expires_at: session.expiresAt,
  });
}

export async function deleteSession(db: Db, tokenHash: string): Promise<void> {
  await db('sessions').where({ token_hash: tokenHash }).delete();
}

export async function findLiveSession(db: Db, input: { tokenHash: string; now: Date }): Promise<LiveSession | null> {
  const row = await db('sessions as s')
    .join('users as u', 'u.id', 's.user_id')
    .where('s.token_hash', input.tokenHash)
    .where('s.expires_at', '>', input.now)
    .first<SessionUserRow | undefined>('s.csrf_token', 's.expires_at', 'u.*');
  return row ? toLiveSession(row) : null;
}
