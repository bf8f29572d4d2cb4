import { z } from 'zod';
import { isUuid } from '../shared/ids';
import { isKnownTimeZone, parseHhMm, parseLocalDateTime, type LocalWindow, type SiteFreeze } from './site-schedule';

/** A site as the services return it (adapters present it in their own wire format). */
export interface Site {
  id: string;
  name: string;
  /** IANA zone, in its canonical spelling (`Europe/Berlin`). */
  timeZone: string;
  address: string | null;
  customerRef: string | null;
  maintenanceWindow: LocalWindow | null;
  freezes: SiteFreeze[];
  /** Devices assigned to the site now. */
  deviceCount: number;
  createdAt: string;
  updatedAt: string;
}

/** How a device record names its site. */
export interface SiteRef {
  id: string;
  name: string;
}

export const SITE_LIMITS = { name: 100, address: 500, customerRef: 100, freezes: 100, reason: 200 } as const;

/** The zone's canonical IANA name (`europe/berlin` -> `Europe/Berlin`), or null when not an IANA zone. */
export function canonicalTimeZone(value: string): string | null {
  // Offsets (`+01:00`) are what fixed-offset windows are made of: a site needs a zone with DST rules.
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(value) || !isKnownTimeZone(value)) return null;
  return new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone;
}

const TimeZone = z
  .string()
  .max(64)
  .transform((value, ctx) => {
    const zone = canonicalTimeZone(value.trim());
    if (zone === null) {
      ctx.addIssue({ code: 'custom', message: 'is not an IANA time zone (e.g. Europe/Berlin)' });
      return z.NEVER;
    }
    return zone;
  });

const HhMm = z.string().refine((v) => parseHhMm(v) !== null, 'must be HH:MM (24 h, local time)');

export const LocalWindowInput = z.strictObject({ start: HhMm, end: HhMm }).refine((w) => w.start !== w.end, {
  message: 'start and end must differ (a window may span midnight: 22:00 to 04:00)',
});

const LocalDateTime = z
  .string()
  .refine((v) => parseLocalDateTime(v) !== null, 'must be a local date-time YYYY-MM-DDTHH:MM (site time, no offset)');

export const SiteFreezeInput = z
  .strictObject({
    from: LocalDateTime,
    to: LocalDateTime,
    reason: z.string().trim().min(1).max(SITE_LIMITS.reason).optional(),
  })
  // Same fixed-width format: text order is time order.
  .refine((f) => f.from < f.to, { path: ['to'], message: 'must be after from' });

const Name = z
  .string()
  .trim()
  .min(1)
  .max(SITE_LIMITS.name)
  // A `site` reference may be an id or a name: a name shaped like an id would be ambiguous.
  .refine((n): boolean => !isUuid(n), 'must not look like a site id (UUID)');

const Optional = (max: number) => z.string().trim().max(max).nullable().optional();

export const CreateSiteInput = z.strictObject({
  name: Name,
  timeZone: TimeZone,
  address: Optional(SITE_LIMITS.address),
  customerRef: Optional(SITE_LIMITS.customerRef),
  maintenanceWindow: LocalWindowInput.nullable().optional(),
  freezes: z.array(SiteFreezeInput).max(SITE_LIMITS.freezes).optional(),
});
export type CreateSiteInput = z.input<typeof CreateSiteInput>;

/** Merge semantics: absent fields stay; null clears an optional one. */
export const UpdateSiteInput = z.strictObject({
  name: Name.optional(),
  timeZone: TimeZone.optional(),
  address: Optional(SITE_LIMITS.address),
  customerRef: Optional(SITE_LIMITS.customerRef),
  maintenanceWindow: LocalWindowInput.nullable().optional(),
  /** Replaces the whole list. */
  freezes: z.array(SiteFreezeInput).max(SITE_LIMITS.freezes).optional(),
});
export type UpdateSiteInput = z.input<typeof UpdateSiteInput>;

export const MAX_SITE_PAGE = 200;

export const ListSitesInput = z.strictObject({
  limit: z.number().int().min(1).max(MAX_SITE_PAGE).default(50),
  cursor: z.string().max(400).optional(),
  /** Case-insensitive substring of the name. */
  q: z.string().min(1).max(100).optional(),
});
export type ListSitesInput = z.input<typeof ListSitesInput>;

/** `site` in a device PATCH, a claim or a filter: a site id or a site name (case-insensitive). */
export const SiteReference = z.string().trim().min(1).max(SITE_LIMITS.name);
