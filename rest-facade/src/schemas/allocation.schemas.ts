import { z } from 'zod';

/** Wire schema (snake_case) of the allocation: its route and the claim answer. */
export const AllocationSchema = z
  .object({
    quota: z.number().int(),
    provisioned: z.number().int().describe('Devices currently claimed'),
    available: z.number().int(),
    budget: z.object({ amount: z.number(), currency: z.string(), spent: z.number(), remaining: z.number() }),
    unit_price: z.number().describe('Charged per claimed device'),
    thresholds: z.array(
      z.object({ kind: z.enum(['quota', 'budget']), percent: z.number().int(), reached_at: z.string().nullable() }),
    ),
  })
  .meta({ id: 'Allocation' });
