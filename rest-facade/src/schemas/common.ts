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
  // RFC 9457 extension members: e.g. a rejected claim's `offending_serials`, quota figures.
  .loose()
  .meta({ id: 'Problem' });

export const IdParams = z.object({ id: z.string().min(1).max(64) });
