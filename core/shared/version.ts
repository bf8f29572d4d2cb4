import { DomainError } from './errors';
import { parseVersion, versionSortKey, type ParsedVersion } from '#protocol/version';

// The grammar is the device protocol's (devices report versions, commands carry them); the
// domain adds its error for a bad one, and the order it stores beside every firmware string.
export { parseVersion, isValidVersion, type ParsedVersion } from '#protocol/version';

export function requireVersion(value: string, field = 'version'): ParsedVersion {
  const parsed = parseVersion(value);
  if (!parsed) {
    throw new DomainError('invalid_version', `"${value}" is not a dotted version (e.g. 1.4.2, 1.4.2.7, 2.0.0-rc.1).`, {
      errors: [{ field, message: 'must be a dotted version of 1 to 4 numeric parts, optionally with a pre-release' }],
    });
  }
  return parsed;
}

/** Most distinct versions whose keys are remembered; the memory is emptied when it is full. */
const REMEMBERED_KEYS = 1000;
const rememberedKeys = new Map<string, string>();

/**
 * Stored beside every firmware string so SQL filters such as `firmware_lt` compare versions,
 * never text (byte order under COLLATE "C" is the version order).
 *
 * A fleet runs a handful of versions, and heartbeats, dispatch and reports ask for the same few
 * keys all the time: they are remembered instead of parsed again. Parsing each candidate's target
 * was 2 % of the service's profile of an OTA delivery (bench/ota.bench.ts `--profile`). Bounded,
 * so versions a client makes up cost only the parse they always cost; an invalid one throws and
 * is not remembered.
 */
export function versionKey(value: string): string {
  let key = rememberedKeys.get(value);
  if (key === undefined) {
    key = versionSortKey(requireVersion(value));
    if (rememberedKeys.size >= REMEMBERED_KEYS) rememberedKeys.clear();
    rememberedKeys.set(value, key);
  }
  return key;
}

/** Negative when a < b, zero when equal in order, positive when a > b. */
export function compareVersions(a: string, b: string): number {
  const ka = versionKey(a);
  const kb = versionKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
