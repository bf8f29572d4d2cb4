import type { Role } from '../../shared/actor';
import type { ApiKey } from '../account-types';
import type { Db } from '../../db/db';

interface ApiKeyRow {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  role: Role;
  rate_limit_per_minute: number | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
}

const toApiKey = (row: ApiKeyRow): ApiKey => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  role: row.role,
  rateLimitPerMinute: row.rate_limit_per_minute,
  lastUsedAt: row.last_used_at ? new Date(row.last_used_at).toISOString() : null,
  revokedAt: row.revoked_at ? new Date(row.revoked_at).toISOString() : null,
  createdAt: new Date(row.created_at).toISOString(),
});

export interface NewApiKey {
  id: string;
  accountId: string;
  name: string;
  prefix: string;
  role: Role;
  secretHash: string;
  createdAt: Date;
}

export async function insertApiKey(db: Db, key: NewApiKey): Promise<ApiKey> {
  const row: ApiKeyRow = {
    id: key.id,
    account_id: key.accountId,
    name: key.name,
    prefix: key.prefix,
    role: key.role,
    rate_limit_per_minute: null,
    last_used_at: null,
    revoked_at: null,
    created_at: key.createdAt,
  };
  await db('api_keys').insert({ ...row, secret_hash: key.secretHash });
  return toApiKey(row);
}

export async function listApiKeys(db: Db, accountId: string): Promise<ApiKey[]> {
  const rows = (await db('api_keys').where({ account_id: accountId }).orderBy('created_at', 'desc')) as ApiKeyRow[];
  return rows.map(toApiKey);
}

/** Revokes the key (a key revoked before keeps its first revocation time); null when the account has no such key. */
export async function revokeApiKey(
  db: Db,
  input: { id: string; accountId: string; now: Date },
): Promise<ApiKey | null> {
  const [row] = (await db('api_keys')
    .where({ id: input.id, account_id: input.accountId })
    .update({ revoked_at: db.raw('coalesce(revoked_at, ?)', [input.now]) })
    .returning('*')) as ApiKeyRow[];
  return row ? toApiKey(row) : null;
}

/** False when there is no such key. */
export async function setApiKeyRateLimit(db: Db, input: { id: string; perMinute: number | null }): Promise<boolean> {
  return (await db('api_keys').where({ id: input.id }).update({ rate_limit_per_minute: input.perMinute })) > 0;
}

/** An unrevoked key by the digest of its secret, with its account. */
export async function findActiveApiKey(
  db: Db,
  secretHash: string,
): Promise<{ apiKey: ApiKey; accountId: string } | null> {
  // The lookup is by digest (indexed, unique); equality of a 256-bit digest leaks nothing useful.
  const row = (await db('api_keys').where({ secret_hash: secretHash }).whereNull('revoked_at').first()) as
    ApiKeyRow | undefined;
  return row ? { apiKey: toApiKey(row), accountId: row.account_id } : null;
}

export async function recordApiKeyUse(db: Db, input: { secretHash: string; now: Date }): Promise<void> {
  await db('api_keys').where({ secret_hash: input.secretHash }).update({ last_used_at: input.now });
}
