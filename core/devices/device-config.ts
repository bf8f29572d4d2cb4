import { z } from 'zod';

/**
 * The configurable part of a device (docs/rest-devices.md). Keys are snake_case
 * everywhere (database, REST, the MQTT `devices/{serial}/config` payload) because the device
 * protocol is snake_case JSON: one spelling, no mapping layer that could drift.
 */

const HH_MM = /^([01]\d|2[0-3]):[0-5]\d$/;

/** True when the runtime's ICU knows this IANA zone name (e.g. "Europe/Berlin", "UTC"). */
export function isIanaTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat(undefined, { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export const MaintenanceWindow = z
  .strictObject({
    start: z.string().regex(HH_MM, 'must be HH:MM (24 h, local time)'),
    end: z.string().regex(HH_MM, 'must be HH:MM (24 h, local time)'),
  })
  .refine((w) => w.start !== w.end, {
    message: 'start and end must differ (a window may span midnight: 22:00 to 04:00)',
  })
  .meta({
    id: 'MaintenanceWindow',
    description: 'Local-time window in which updates may be installed; may span midnight.',
  });
export type MaintenanceWindow = z.infer<typeof MaintenanceWindow>;

/** A full configuration as stored and pushed; every key optional so reported configs fit too. */
export const DeviceConfig = z
  .strictObject({
    heartbeat_interval_s: z.number().int().min(10).max(3600).optional(),
    dim_level: z.number().int().min(0).max(100).optional(),
    power_on_level: z.number().int().min(0).max(100).optional(),
    timezone: z
      .string()
      .min(1)
      .max(64)
      .refine(isIanaTimeZone, 'must be an IANA time zone name such as Europe/Berlin')
      .optional(),
    maintenance_window: MaintenanceWindow.nullable().optional(),
    /** Seconds between luminaire readings (docs/device-protocol.md "Luminaire data"); absent: 900. */
    luminaire_interval_s: z.number().int().min(60).max(86_400).optional(),
  })
  .meta({ id: 'DeviceConfig' });
export type DeviceConfig = z.infer<typeof DeviceConfig>;

/**
 * PATCH input for `config`: merged into the desired configuration. Omitted keys stay as they
 * are; `maintenance_window: null` removes the window. Other keys cannot be null.
 */
export const DeviceConfigPatch = DeviceConfig.meta({ id: 'DeviceConfigPatch' });
export type DeviceConfigPatch = DeviceConfig;

/** What a newly claimed device is told to run until someone changes it. */
// `luminaire_interval_s` is not sent unless set: a device takes 900 s when it is absent.
export const DEFAULT_DEVICE_CONFIG: Readonly<
  Required<Omit<DeviceConfig, 'maintenance_window' | 'luminaire_interval_s'>>
> & {
  maintenance_window: null;
} = Object.freeze({
  heartbeat_interval_s: 60,
  dim_level: 100,
  power_on_level: 100,
  timezone: 'UTC',
  maintenance_window: null,
});

export const TAG_LIMITS = { maxTags: 50, maxKeyLength: 64, maxValueLength: 256 } as const;

/** Tags PATCH: string to string, merged; a null value removes that tag (JSON merge patch, RFC 7396). */
const TagsRecord = z.record(
  z.string().min(1).max(TAG_LIMITS.maxKeyLength),
  z.string().max(TAG_LIMITS.maxValueLength).nullable(),
);
export const TagsPatch = z
  .preprocess((value, ctx) => {
    // zod's record silently drops an own `__proto__` key (JSON.parse creates one): refuse it openly.
    if (value !== null && typeof value === 'object' && Object.hasOwn(value, '__proto__')) {
      ctx.addIssue({ code: 'custom', path: ['__proto__'], message: 'is a reserved key', input: value });
    }
    return value;
  }, TagsRecord)
  .refine((tags) => Object.keys(tags).length <= 100, 'at most 100 tag changes per request')
  .meta({
    id: 'TagsPatch',
    description:
      'Merged into the tags; a null value removes the tag. At most 50 tags per device, keys 1..64 and values up to 256 characters.',
  });
export type TagsPatch = z.infer<typeof TagsPatch>;

/** Merge one PATCH into a configuration; returns the new object and the keys that changed. */
export function mergeConfig(
  current: DeviceConfig,
  patch: DeviceConfigPatch,
): { config: DeviceConfig; changed: string[] } {
  const next: Record<string, unknown> = { ...current };
  const changed: string[] = [];
  // Values as `unknown`: the type leaves absent keys out, but a parsed patch may carry a key whose
  // value is undefined, which changes nothing.
  const entries: Array<[string, unknown]> = Object.entries(patch);
  for (const [key, value] of entries) {
    if (value === undefined) continue;
    if (value === null) {
      if (key in next && next[key] !== null) changed.push(key);
      next[key] = null;
      continue;
    }
    if (JSON.stringify(next[key]) !== JSON.stringify(value)) changed.push(key);
    next[key] = value;
  }
  return { config: next, changed };
}

/**
 * Merge tags; null removes. Works on a Map so keys such as `__proto__` stay plain data
 * (Object.fromEntries defines own properties, assignment would change the prototype).
 */
export function mergeTags(
  current: Record<string, string>,
  patch: TagsPatch,
): { tags: Record<string, string>; set: Record<string, string>; removed: string[] } {
  const tags = new Map(Object.entries(current));
  const set = new Map<string, string>();
  const removed: string[] = [];
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      if (tags.delete(key)) removed.push(key);
    } else if (tags.get(key) !== value) {
      tags.set(key, value);
      set.set(key, value);
    }
  }
  return { tags: Object.fromEntries(tags), set: Object.fromEntries(set), removed };
}
