import { z } from 'zod';

/** Wire schema (snake_case) of the portal session routes; the login body is the domain's LoginInput. */
export const SessionSchema = z
  .object({
    user: z.object({ id: z.string(), email: z.string(), role: z.enum(['admin', 'viewer']) }),
    account_id: z.string(),
    csrf_token: z.string(),
    expires_at: z.string(),
  })
  .meta({ id: 'Session' });
