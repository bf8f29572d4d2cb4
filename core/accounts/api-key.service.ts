import { z } from 'zod';
import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { newId, isUuid } from '../shared/ids';
import { notFound } from '../shared/errors';
import { generateSecret, sha256Hex } from '../shared/secrets';
import { requireAdmin, type Actor } from '../shared/actor';
import type { ApiKey } from './account-types';
import {
  findActiveApiKey,
  insertApiKey,
  listApiKeys,
  recordApiKeyUse,
  revokeApiKey,
  setApiKeyRateLimit,
} from './store/api-keys.store';

export type { ApiKey } from './account-types';

export const API_KEY_PREFIX = 'flk_';

export const CreateApiKeyInput = z.object({
  name: z.string().trim().min(1).max(100),
  role: z.enum(['admin', 'viewer']).default('viewer'),
});
export type CreateApiKeyInput = z.input<typeof CreateApiKeyInput>;

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

export class ApiKeyService {
  private readonly cache = new Map<string, { key: AuthenticatedKey; until: number; lastUsedWritten: number }>();
  private readonly revokeListeners = new Set<(keyId: string) => void>();

  constructor(private readonly deps: ServiceDeps) {}

  async create(
    actor: Actor,
    raw: CreateApiKeyInput,
    trx?: Knex.Transaction,
  ): Promise<{ apiKey: ApiKey; secret: string }> {
    requireAdmin(actor);
    const input = CreateApiKeyInput.parse(raw);
    const secret = generateSecret(API_KEY_PREFIX);
    const apiKey = await insertApiKey(trx ?? this.deps.knex, {
      id: newId(),
      accountId: actor.accountId,
      name: input.name,
      prefix: secret.slice(0, API_KEY_PREFIX.length + 6),
      role: input.role,
      secretHash: sha256Hex(secret),
      createdAt: this.deps.clock.now(),
    });
    return { apiKey, secret };
  }

  async list(actor: Actor): Promise<ApiKey[]> {
    return listApiKeys(this.deps.knex, actor.accountId);
  }

  async revoke(actor: Actor, id: string): Promise<ApiKey> {
    requireAdmin(actor);
    if (!isUuid(id)) throw notFound('API key');
    const revoked = await revokeApiKey(this.deps.knex, { id, accountId: actor.accountId, now: this.deps.clock.now() });
    if (!revoked) throw notFound('API key');
    for (const [hash, entry] of this.cache) if (entry.key.actor.apiKeyId === id) this.cache.delete(hash);
    for (const listener of this.revokeListeners) listener(id);
    return revoked;
  }

  /** Called with the key id when a key is revoked (open subscriptions close). */
  onRevoked(listener: (keyId: string) => void): () => void {
    this.revokeListeners.add(listener);
    return () => this.revokeListeners.delete(listener);
  }

  /** Operator tool: raise (or reset with null) one key's per-minute limit. */
  async setRateLimit(id: string, perMinute: number | null): Promise<void> {
    if (!(await setApiKeyRateLimit(this.deps.knex, { id, perMinute }))) throw notFound('API key');
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
    const found = await findActiveApiKey(this.deps.knex, hash);
    if (!found) {
      this.cache.delete(hash);
      return null;
    }
    const { apiKey } = found;
    const key: AuthenticatedKey = {
      actor: { accountId: found.accountId, role: apiKey.role, principal: `api_key:${apiKey.id}`, apiKeyId: apiKey.id },
      rateLimitPerMinute: apiKey.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
    };
    const lastUsed = apiKey.lastUsedAt ? new Date(apiKey.lastUsedAt).getTime() : 0;
    const entry = { key, until: now + AUTH_CACHE_MS, lastUsedWritten: lastUsed };
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hash, entry);
    this.touch(hash, entry, now);
    return key;
  }

  private touch(hash: string, entry: { key: AuthenticatedKey; lastUsedWritten: number }, now: number): void {
    if (now - entry.lastUsedWritten < LAST_USED_RESOLUTION_MS) return;
    entry.lastUsedWritten = now;
    recordApiKeyUse(this.deps.knex, { secretHash: hash, now: this.deps.clock.now() }).catch((error: unknown) =>
      this.deps.logger.warn({ err: error }, 'could not record API key use'),
    );
  }
}
