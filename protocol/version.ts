/**
 * The firmware version grammar of the device protocol: 1 to 4 numeric parts, an optional
 * pre-release (`-rc.1`) and optional build metadata (`+abc`, ignored for order). Parts compare
 * numerically (`1.10.0` > `1.9.2`), missing parts count as 0 (`1.4` = `1.4.0`), and a
 * pre-release is older than its release; pre-release identifiers compare as in SemVer 2.0
 * (numeric < alphanumeric, numbers numerically). Devices report, and commands carry, versions
 * of this form; the service's domain orders and stores them by `versionSortKey`.
 * `VERSION_PATTERN` is also the `pattern` of every version in the published JSON Schemas (no
 * flags, so it means the same to ECMA-262 and to JSON Schema validators).
 */
export const VERSION_PATTERN =
  /^(\d{1,9})(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

/** Longest version string (characters). */
export const MAX_VERSION_LENGTH = 64;

export interface ParsedVersion {
  parts: [number, number, number, number];
  prerelease: string[];
}

export function parseVersion(value: string): ParsedVersion | null {
  if (typeof value !== 'string' || value.length > MAX_VERSION_LENGTH) return null;
  const m = VERSION_PATTERN.exec(value);
  if (!m) return null;
  const parts = [m[1], m[2], m[3], m[4]].map((p) => (p === undefined ? 0 : Number(p))) as ParsedVersion['parts'];
  return { parts, prerelease: m[5] ? m[5].split('.') : [] };
}

export function isValidVersion(value: string): boolean {
  return parseVersion(value) !== null;
}

const NUMERIC = /^\d+$/;

/**
 * A string whose byte order (COLLATE "C") is the version order.
 * Numeric parts are zero-padded; a release ends in `~` which sorts after any pre-release (`!`),
 * and pre-release identifiers are separated by a space, which sorts before every identifier
 * character, so a shorter identifier list sorts first as SemVer requires.
 */
export function versionSortKey(parsed: ParsedVersion): string {
  const numeric = parsed.parts.map((p) => String(p).padStart(10, '0')).join('.');
  if (parsed.prerelease.length === 0) return `${numeric}~`;
  const pre = parsed.prerelease
    .map((id) => (NUMERIC.test(id) ? `0${id.replace(/^0+(?=\d)/, '').padStart(10, '0')}` : `1${id}`))
    .join(' ');
  return `${numeric}!${pre}`;
}
