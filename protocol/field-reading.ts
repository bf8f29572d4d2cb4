import type { z } from 'zod';
import { MAX_DEVICE_PAYLOAD_BYTES } from './payloads';

/**
 * How the service reads a device's JSON payload field by field (heartbeats, luminaire readings):
 * each field that fails its schema is refused on its own, with a reason, and the valid ones are
 * recorded. Only a payload that is not a JSON object is dropped whole; one above the size limit
 * is not read at all.
 */

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

export interface RefusedField<F extends string = string> {
  field: F;
  reason: FieldRefusalReason;
  /** What the device sent: a string as it is, anything else as JSON; cut at MAX_REFUSED_VALUE_LENGTH. */
  value: string;
}

/** Why a payload is not read at all. */
export type PayloadUnread = 'too_large' | 'not_json' | 'not_object';

type FieldSchemas<F extends string> = Record<F, z.ZodType>;

/**
 * The payload's fields named in `fields`, each parsed by its schema in `shape`. Own keys only:
 * JSON.parse makes `__proto__` an own key, never the prototype.
 */
export function readFields<F extends string>(
  payload: Buffer | string,
  fields: readonly F[],
  shape: FieldSchemas<F>,
  /**
   * A shortcut for plainly valid values: what the field's schema gives for `value`, decided
   * without zod, or undefined to ask the schema. It must accept nothing the schema refuses.
   */
  atOnce?: (field: F, value: unknown) => unknown,
):
  | { ok: true; values: Partial<Record<F, unknown>>; refused: Array<RefusedField<F>> }
  | { ok: false; reason: PayloadUnread } {
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
  const values: Partial<Record<F, unknown>> = {};
  const refused: Array<RefusedField<F>> = [];
  for (const field of fields) {
    if (!Object.hasOwn(sent, field)) continue;
    const value = sent[field];
    const fast = atOnce?.(field, value);
    if (fast !== undefined) {
      values[field] = fast;
      continue;
    }
    const parsed = shape[field].safeParse(value);
    if (parsed.success) values[field] = parsed.data;
    else refused.push({ field, reason: reasonOf(parsed.error.issues[0]), value: shown(value) });
  }
  return { ok: true, values, refused };
}

type Issue = z.core.$ZodIssue;

/** The refusal reason of a field's first zod issue. */
function reasonOf(issue: Issue | undefined): FieldRefusalReason {
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

/** What a refused field's value is shown as. */
function shown(value: unknown): string {
  // Parsed from JSON, so never undefined: JSON.stringify always answers a string here.
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > MAX_REFUSED_VALUE_LENGTH ? text.slice(0, MAX_REFUSED_VALUE_LENGTH) : text;
}
