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

/**
 * Stored beside every firmware string so SQL filters such as `firmware_lt` compare versions,
 * never text (byte order under COLLATE "C" is the version order).
 */
export function versionKey(value: string): string {
  return versionSortKey(requireVersion(value));
}

/** Negative when a < b, zero when equal in order, positive when a > b. */
export function compareVersions(a: string, b: string): number {
  const ka = versionKey(a);
  const kb = versionKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
