import { z } from 'zod';

/** Wire schema (snake_case) of the API key routes; the create body is the domain's CreateApiKeyInput. */
export const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    role: z.enum(['admin', 'viewer']),
    rate_limit_per_minute: z.number().int(),
    last_used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'ApiKey' });
