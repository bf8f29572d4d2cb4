import { DEFAULT_RATE_LIMIT_PER_MINUTE, type ApiKey } from '#core/accounts/api-key.service';

/** Domain API key -> wire format (snake_case); the secret is never part of it. */
export const presentApiKey = (k: ApiKey) => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  role: k.role,
  rate_limit_per_minute: k.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
  last_used_at: k.lastUsedAt,
  revoked_at: k.revokedAt,
  created_at: k.createdAt,
});
