import { z } from 'zod';
import { DomainError } from '../shared/errors';
import { DeviceConfigPatch, TagsPatch, TAG_LIMITS, mergeConfig, mergeTags, type DeviceConfig } from './device-config';
import type { NewDeviceEvent } from './device-history';
import type { SiteRef } from '../sites/site-types';

/** Fields that exist on a device but are not the caller's to set (OWASP API3, mass assignment). */
const READ_ONLY_FIELDS = new Set([
  'id',
  'serial',
  'model',
  'firmware',
  'status',
  'connectivity',
  'last_seen',
  'ip',
  'update',
  'claimed_at',
  'uptime_s',
  'rssi',
  'credentials',
]);

/** PATCH /devices/:serial body: merge semantics, unknown and read-only fields refused. */
export const UpdateDeviceInput = z.strictObject(
  {
    name: z.string().trim().min(1).max(200).optional(),
    tags: TagsPatch.optional(),
    config: DeviceConfigPatch.optional(),
    /** A site id or name of the account; null unassigns. */
    site: z.string().trim().min(1).max(100).nullable().optional(),
  },
  {
    error: (issue) => {
      if (issue.code !== 'unrecognized_keys') return undefined;
      const keys = issue.keys;
      const readOnly = keys.filter((k) => READ_ONLY_FIELDS.has(k));
      const unknown = keys.filter((k) => !READ_ONLY_FIELDS.has(k));
      return (
        [
          readOnly.length ? `read-only: ${readOnly.join(', ')}` : '',
          unknown.length ? `unknown: ${unknown.join(', ')}` : '',
        ]
          .filter(Boolean)
          .join('; ') + ' (settable: name, tags, config, site)'
      );
    },
  },
);
export type UpdateDeviceInput = z.input<typeof UpdateDeviceInput>;

/** What a PATCH starts from: the device as locked for the change. */
export interface DeviceUpdateBase {
  id: string;
  serial: string;
  name: string;
  tags: Record<string, string>;
  desiredConfig: DeviceConfig;
  desiredConfigVersion: number;
  siteId?: string | null;
}

export type DeviceChange = 'name' | 'tags' | 'config' | 'site';

/** The outcome of one PATCH: what to write, the history it leaves, and what changed. */
export interface DeviceUpdatePlan {
  name?: string;
  tags?: Record<string, string>;
  /** A configuration change bumps the desired version; the device is sent it after commit. */
  config?: { version: number; config: DeviceConfig };
  site?: SiteRef | null;
  /** In the order name, tags, config, site; empty when the PATCH changes nothing. */
  changes: DeviceChange[];
  history: NewDeviceEvent[];
}

/**
 * Applies a PATCH to a device (merge semantics): a name that differs renames it; tags merge (a
 * null value removes one) up to TAG_LIMITS.maxTags; configuration keys merge and, when any
 * value changed, the desired version goes up by one. Setting what is already there changes
 * nothing and writes no history. `site` is the PATCH's `site` already resolved to one of the
 * account's sites (null: unassign; undefined: not in the PATCH).
 */
export function planDeviceUpdate(
  device: DeviceUpdateBase,
  patch: z.output<typeof UpdateDeviceInput>,
  by: { accountId: string; principal: string },
  site?: SiteRef | null,
): DeviceUpdatePlan {
  const plan: DeviceUpdatePlan = { changes: [], history: [] };
  const base = { accountId: by.accountId, deviceId: device.id };
  if (patch.name !== undefined && patch.name !== device.name) {
    plan.name = patch.name;
    plan.changes.push('name');
    plan.history.push({ ...base, type: 'renamed', data: { from: device.name, to: patch.name, by: by.principal } });
  }
  if (patch.tags !== undefined) {
    const merged = mergeTags(device.tags, patch.tags);
    const count = Object.keys(merged.tags).length;
    if (count > TAG_LIMITS.maxTags) {
      throw new DomainError('validation_failed', `A device has at most ${TAG_LIMITS.maxTags} tags.`, {
        errors: [{ field: 'tags', message: `would have ${count} tags; at most ${TAG_LIMITS.maxTags}` }],
      });
    }
    if (Object.keys(merged.set).length > 0 || merged.removed.length > 0) {
      plan.tags = merged.tags;
      plan.changes.push('tags');
      plan.history.push({
        ...base,
        type: 'tags_changed',
        data: { set: merged.set, removed: merged.removed, by: by.principal },
      });
    }
  }
  if (patch.config !== undefined) {
    const merged = mergeConfig(device.desiredConfig, patch.config);
    if (merged.changed.length > 0) {
      const version = device.desiredConfigVersion + 1;
      plan.config = { version, config: merged.config };
      plan.changes.push('config');
      plan.history.push({
        ...base,
        type: 'config_changed',
        data: { version, changed: merged.changed, config: merged.config, by: by.principal },
      });
    }
  }
  if (site !== undefined && (site?.id ?? null) !== (device.siteId ?? null)) {
    plan.site = site;
    plan.changes.push('site');
    plan.history.push({
      ...base,
      type: 'site_changed',
      data: { from: device.siteId ?? null, to: site ? { id: site.id, name: site.name } : null, by: by.principal },
    });
  }
  return plan;
}
