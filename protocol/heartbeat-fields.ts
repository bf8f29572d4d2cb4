import { z } from 'zod';
import { Heartbeat } from './payloads';
import { MAX_VERSION_LENGTH, VERSION_PATTERN } from './version';
import { readFields, type PayloadUnread, type RefusedField as RefusedFieldOf } from './field-reading';

/**
 * How the service reads a heartbeat: field by field (field-reading.ts). A heartbeat that is a
 * JSON object counts as the device being heard whatever its fields say; each field that fails its
 * schema is refused on its own (with a reason, counted per device) and the valid ones are recorded.
 */

export { FIELD_REFUSAL_REASONS, MAX_REFUSED_VALUE_LENGTH, type FieldRefusalReason } from './field-reading';

export const HEARTBEAT_FIELDS = ['firmware', 'ip', 'uptime_s', 'rssi'] as const;
export type HeartbeatField = (typeof HEARTBEAT_FIELDS)[number];

export type RefusedField = RefusedFieldOf<HeartbeatField>;

/** Why a heartbeat payload is not read at all. */
export type HeartbeatUnread = PayloadUnread;

export type HeartbeatReading =
  { ok: true; values: Heartbeat; refused: RefusedField[] } | { ok: false; reason: HeartbeatUnread };

export function readHeartbeat(payload: Buffer | string): HeartbeatReading {
  const read = readFields(payload, HEARTBEAT_FIELDS, Heartbeat.shape, acceptedAtOnce);
  // Each field was parsed by its own schema of Heartbeat: TypeScript cannot pair them by key.
  return read.ok ? { ok: true, values: read.values as Heartbeat, refused: read.refused } : read;
}

/** zod's own IPv4 pattern: the one `z.ipv4()` in Heartbeat's `ip` tests. */
const IPV4 = z.regexes.ipv4;

/**
 * The value a heartbeat field's schema gives for `value` when that is plainly valid, decided
 * without zod (undefined: ask the schema). Only a shortcut for the common case: every check here
 * is one the schema makes itself (the same bounds, the same patterns: zod's own IPv4 pattern,
 * which the union tries first), so it accepts nothing the schema refuses and gives what the
 * schema would; anything else (an IPv6 address, any value to refuse) goes through the schema,
 * which says why. zod's safeParse was about a sixth of the broker's own CPU per heartbeat
 * (profile of bench/heartbeat-capacity.bench.ts); test/unit/heartbeat-fields.test.ts holds the
 * two to the same answers.
 */
export function acceptedAtOnce(field: HeartbeatField, value: unknown): string | number | undefined {
  switch (field) {
    case 'firmware':
      return typeof value === 'string' &&
        value.length >= 1 &&
        value.length <= MAX_VERSION_LENGTH &&
        VERSION_PATTERN.test(value)
        ? value
        : undefined;
    case 'ip':
      return typeof value === 'string' && IPV4.test(value) ? value : undefined;
    case 'uptime_s':
      return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 2_147_483_647
        ? value
        : undefined;
    case 'rssi':
      return typeof value === 'number' && value >= -150 && value <= 0 ? Math.round(value) : undefined;
  }
}
