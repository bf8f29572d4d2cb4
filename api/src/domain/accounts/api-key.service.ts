import { z } from 'zod';
import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { newId, isUuid } from '../shared/ids';
import { notFound } from '../shared/errors';
import { generateSecret, sha256Hex } from '../shared/secrets';
import { requireAdmin, type Actor, type Role } from '../shared/actor';

export const API_KEY_PREFIX = 'flk_';

export const CreateApiKeyInput = z.object({
  name: z.string().trim().min(1).max(100),
  role: z.enum(['admin', 'viewer']).default('viewer'),
});
export type CreateApiKeyInput = z.input<typeof CreateApiKeyInput>;

export interface ApiKey {
  id: string;
  name: string;
  /** First characters of the secret, enough to recognise it in a list. */
  prefix: string;
  role: Role;
  rateLimitPerMinute: number | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  createdAt: string;
}

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

export interface AuthenticatedKey {
  actor: Actor;
  /** Requests per minute for this key (default 100 unless the operator raised it). */
  rateLimitPerMinute: number;
}

export const DEFAULT_RATE_LIMIT_PER_MINUTE = 100;
/** How long a verified key is trusted without asking the database again (ms). */
const AUTH_CACHE_MS = 2000;
/** `last_used_at` is written at most this often per key (ms), not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

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

export class ApiKeyService {
  private readonly cache = new Map<string, { key: AuthenticatedKey; until: number; lastUsedWritten: number }>();
  private readonly revokeListeners = new Set<(keyId: string) => void>();

  constructor(private readonly deps: ServiceDeps) {}

  async create(actor: Actor, raw: CreateApiKeyInput, trx?: Knex.Transaction): Promise<{ apiKey: ApiKey; secret: string }> {
    requireAdmin(actor);
    const input = CreateApiKeyInput.parse(raw);
    const secret = generateSecret(API_KEY_PREFIX);
    const row: ApiKeyRow = {
      id: newId(),
      account_id: actor.accountId,
      name: input.name,
      prefix: secret.slice(0, API_KEY_PREFIX.length + 6),
      role: input.role,
      rate_limit_per_minute: null,
      last_used_at: null,
      revoked_at: null,
      created_at: this.deps.clock.now(),
    };
    await (trx ?? this.deps.knex)('api_keys').insert({ ...row, secret_hash: sha256Hex(secret) });
    return { apiKey: toApiKey(row), secret };
  }

  async list(actor: Actor): Promise<ApiKey[]> {
    const rows = (await this.deps.knex('api_keys')
      .where({ account_id: actor.accountId })
      .orderBy('created_at', 'desc')) as ApiKeyRow[];
    return rows.map(toApiKey);
  }

  async revoke(actor: Actor, id: string): Promise<ApiKey> {
    requireAdmin(actor);
    if (!isUuid(id)) throw notFound('API key');
    const [row] = (await this.deps.knex('api_keys')
      .where({ id, account_id: actor.accountId })
      .update({ revoked_at: this.deps.knex.raw('coalesce(revoked_at, ?)', [this.deps.clock.now()]) })
      .returning('*')) as ApiKeyRow[];
    if (!row) throw notFound('API key');
    for (const [hash, entry] of this.cache) if (entry.key.actor.apiKeyId === id) this.cache.delete(hash);
    for (const listener of this.revokeListeners) listener(id);
    return toApiKey(row);
  }

  /** Called with the key id when a key is revoked (open subscriptions close). */
  onRevoked(listener: (keyId: string) => void): () => void {
    this.revokeListeners.add(listener);
    return () => this.revokeListeners.delete(listener);
  }

  /** Operator tool: raise (or reset with null) one key's per-minute limit. */
  async setRateLimit(id: string, perMinute: number | null): Promise<void> {
    const n = await this.deps.knex('api_keys').where({ id }).update({ rate_limit_per_minute: perMinute });
    if (n === 0) throw notFound('API key');
    this.cache.clear();
  }

  /** The Bearer secret to an actor, or null when unknown or revoked. */
  async authenticate(secret: string): Promise<AuthenticatedKey | null> {
    if (!secret.startsWith(API_KEY_PREFIX) || secret.length > 200) return null;
    const hash = sha256Hex(secret);
    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached && cached.until > now) {
      this.touch(hash, cached, now);
      return cached.key;
    }
    // The lookup is by digest (indexed, unique); equality of a 256-bit digest leaks nothing useful.
    const row = (await this.deps.knex('api_keys').where({ secret_hash: hash }).whereNull('revoked_at').first()) as
      | ApiKeyRow
      | undefined;
    if (!row) {
      this.cache.delete(hash);
      return null;
    }
    const key: AuthenticatedKey = {
      actor: { accountId: row.account_id, role: row.role, principal: `api_key:${row.id}`, apiKeyId: row.id },
      rateLimitPerMinute: row.rate_limit_per_minute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
    };
    const lastUsed = row.last_used_at ? new Date(row.last_used_at).getTime() : 0;
    const entry = { key, until: now + AUTH_CACHE_MS, lastUsedWritten: lastUsed };
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hash, entry);
    this.touch(hash, entry, now);
    return key;
  }

  private touch(hash: string, entry: { key: AuthenticatedKey; lastUsedWritten: number }, now: number): void {
    if (now - entry.lastUsedWritten < LAST_USED_RESOLUTION_MS) return;
    entry.lastUsedWritten = now;
    this.deps
      .knex('api_keys')
      .where({ secret_hash: hash })
      .update({ last_used_at: this.deps.clock.now() })
      .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'could not record API key use'));
  }
}
