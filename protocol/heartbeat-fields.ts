import type { z } from 'zod';
import { Heartbeat, MAX_DEVICE_PAYLOAD_BYTES } from './payloads';

/**
 * How the service reads a heartbeat: field by field. A heartbeat that is a JSON object counts as
 * the device being heard whatever its fields say; each field that fails its schema is refused on
 * its own (with a reason, counted per device) and the valid ones are recorded. Only a payload
 * that is not a JSON object is dropped whole; one above the size limit is not read at all.
 */

export const HEARTBEAT_FIELDS = ['firmware', 'ip', 'uptime_s', 'rssi'] as const;
export type HeartbeatField = (typeof HEARTBEAT_FIELDS)[number];

/**
 * Why a field was refused; stable strings (metric labels, API values, docs/device-protocol.md):
 * - `wrong_type`: not the JSON type of the field (a string for `firmware` and `ip`, a number otherwise; `null` too);
 * - `not_an_integer`: a fraction where only integers are taken (`uptime_s`);
 * - `out_of_range`: a number outside the field's bounds;
 * - `too_long`: a string longer than the field takes;
 * - `invalid_format`: a string outside the field's grammar (`firmware` not a version, `ip` not an address).
 */
export const FIELD_REFUSAL_REASONS = [
  'wrong_type',
  'not_an_integer',
  'out_of_range',
  'too_long',
  'invalid_format',
] as const;
export type FieldRefusalReason = (typeof FIELD_REFUSAL_REASONS)[number];

/** Longest `value` kept of a refused field (characters). */
export const MAX_REFUSED_VALUE_LENGTH = 64;

export interface RefusedField {
  field: HeartbeatField;
  reason: FieldRefusalReason;
  /** What the device sent: a string as it is, anything else as JSON; cut at MAX_REFUSED_VALUE_LENGTH. */
  value: string;
}

/** Why a heartbeat payload is not read at all. */
export type HeartbeatUnread = 'too_large' | 'not_json' | 'not_object';

export type HeartbeatReading =
  { ok: true; values: Heartbeat; refused: RefusedField[] } | { ok: false; reason: HeartbeatUnread };

export function readHeartbeat(payload: Buffer | string): HeartbeatReading {
  const size = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
  if (size > MAX_DEVICE_PAYLOAD_BYTES) return { ok: false, reason: 'too_large' };
  let json: unknown;
  try {
    json = JSON.parse(typeof payload === 'string' ? payload : payload.toString('utf8'));
  } catch {
    return { ok: false, reason: 'not_json' };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return { ok: false, reason: 'not_object' };
  const sent = json as Record<string, unknown>;
  const values: Heartbeat = {};
  const refused: RefusedField[] = [];
  for (const field of HEARTBEAT_FIELDS) {
    // Own keys only: JSON.parse makes `__proto__` an own key, never the prototype.
    if (!Object.hasOwn(sent, field)) continue;
    const value = sent[field];
    const parsed = Heartbeat.shape[field].safeParse(value);
    // Each field's schema gives that field's type: TypeScript cannot pair them by the loop's key.
    if (parsed.success) (values as Record<string, unknown>)[field] = parsed.data;
    else refused.push({ field, reason: reasonOf(parsed.error.issues[0]), value: shown(value) });
  }
  return { ok: true, values, refused };
}

type Issue = z.core.$ZodIssue;

/** The refusal reason of a field's first zod issue (shared with luminaire-fields.ts). */
export function reasonOf(issue: Issue | undefined): FieldRefusalReason {
  switch (issue?.code) {
    case 'invalid_type':
      return issue.expected === 'int' ? 'not_an_integer' : 'wrong_type';
    case 'too_big':
      return issue.origin === 'string' ? 'too_long' : 'out_of_range';
    case 'too_small':
      return issue.origin === 'string' ? 'invalid_format' : 'out_of_range';
    case 'invalid_union':
      // `ip`: IPv4 or IPv6. Wrong in every branch for its type means a wrong type.
      return issue.errors.every((branch) => branch[0]?.code === 'invalid_type') ? 'wrong_type' : 'invalid_format';
    default:
      return 'invalid_format';
  }
}

/** What a refused field's value is shown as (shared with luminaire-fields.ts). */
export function shown(value: unknown): string {
  // Parsed from JSON, so never undefined: JSON.stringify always answers a string here.
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > MAX_REFUSED_VALUE_LENGTH ? text.slice(0, MAX_REFUSED_VALUE_LENGTH) : text;
}
