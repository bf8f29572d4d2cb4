import { z } from 'zod';
import { MAX_SITE_PAGE, SITE_LIMITS } from '#core/sites/site-types';

/**
 * Wire schemas (snake_case) of the site routes (docs/ota.md "Sites"). The bodies are REST's own:
 * the routes translate them into the domain's CreateSiteInput / UpdateSiteInput, which check
 * zones, windows and freezes and name the offending field.
 */

const WindowSchema = z
  .object({
    start: z.string().describe('HH:MM, local time of the site'),
    end: z.string().describe('HH:MM, local time; before start: the window spans midnight'),
  })
  .meta({ id: 'SiteMaintenanceWindow' });

const FreezeSchema = z
  .object({
    from: z.string().describe('YYYY-MM-DDTHH:MM, local time of the site (no offset)'),
    to: z.string().describe('YYYY-MM-DDTHH:MM, local time, after from (exclusive)'),
    reason: z.string().optional(),
  })
  .meta({ id: 'SiteFreeze' });

export const SiteSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    time_zone: z.string().describe('IANA time zone, e.g. Europe/Berlin'),
    address: z.string().nullable(),
    customer_ref: z.string().nullable(),
    maintenance_window: WindowSchema.nullable(),
    freezes: z.array(FreezeSchema),
    device_count: z.number().int().describe('Devices assigned to the site now'),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Site' });

const WindowBody = z.strictObject({
  start: z.string().max(5).describe('HH:MM'),
  end: z.string().max(5).describe('HH:MM'),
});
const FreezeBody = z.strictObject({
  from: z.string().max(16).describe('YYYY-MM-DDTHH:MM (site time)'),
  to: z.string().max(16).describe('YYYY-MM-DDTHH:MM (site time)'),
  reason: z.string().max(SITE_LIMITS.reason).optional(),
});

export const CreateSiteBody = z.strictObject({
  name: z.string().max(SITE_LIMITS.name).describe('Unique per account, ignoring case'),
  time_zone: z.string().max(64).describe('IANA time zone (Europe/Berlin); fixed offsets are refused'),
  address: z.string().max(SITE_LIMITS.address).nullable().optional(),
  customer_ref: z.string().max(SITE_LIMITS.customerRef).nullable().optional(),
  maintenance_window: WindowBody.nullable().optional(),
  freezes: z.array(FreezeBody).max(SITE_LIMITS.freezes).optional(),
});
export type CreateSiteBody = z.infer<typeof CreateSiteBody>;

export const UpdateSiteBody = z.strictObject({
  name: z.string().max(SITE_LIMITS.name).optional(),
  time_zone: z.string().max(64).optional(),
  address: z.string().max(SITE_LIMITS.address).nullable().optional().describe('null clears it'),
  customer_ref: z.string().max(SITE_LIMITS.customerRef).nullable().optional().describe('null clears it'),
  maintenance_window: WindowBody.nullable().optional().describe('null removes the window'),
  freezes: z.array(FreezeBody).max(SITE_LIMITS.freezes).optional().describe('Replaces the whole list'),
});
export type UpdateSiteBody = z.infer<typeof UpdateSiteBody>;

export const ListSitesQuery = z.strictObject({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_SITE_PAGE)
    .default(50)
    .describe(`Page size 1..${MAX_SITE_PAGE}, default 50`),
  cursor: z.string().min(1).max(400).optional().describe('next_cursor of the previous page'),
  q: z.string().min(1).max(100).optional().describe('Case-insensitive substring of the name'),
});

export const SiteListSchema = z
  .object({
    sites: z.array(SiteSchema),
    total: z.number().int().describe('Sites matching q (all pages)'),
    next_cursor: z.string().nullable(),
  })
  .meta({ id: 'SiteList' });
