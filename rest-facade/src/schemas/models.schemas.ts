import { z } from 'zod';

/** Wire schema (snake_case) of the model routes; the register body is the domain's RegisterModelInput. */
export const ModelSchema = z
  .object({ id: z.string(), name: z.string(), description: z.string(), created_at: z.string() })
  .meta({ id: 'Model' });
