import { z } from 'zod';

/** Shared REST schemas. Response schemas document the wire format (snake_case). */
export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  })
  .meta({ id: 'Problem' });

export const IdParams = z.object({ id: z.string().min(1).max(64) });
