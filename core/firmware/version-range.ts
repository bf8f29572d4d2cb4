import { MAX_VERSION_LENGTH, versionSortKey, type ParsedVersion } from '#protocol/version';
import { parseVersion } from '../shared/version';

/**
 * `upgrade_from` ranges (docs/ota.md "Upgrade paths"): the syntax of semver ranges, evaluated
 * with OUR version order (1 to 4 numeric parts, pre-releases), which the `semver` package cannot
 * do (it refuses `1.2.3.4`). Supported, as in node-semver:
 * - comparators `<`, `<=`, `>`, `>=`, `=` and bare versions, space-separated (all must hold);
 * - `||` between alternatives; hyphen ranges `1.2 - 1.4.1`;
 * - x-ranges `1.2.x`, `1.x`, `*` (and a bare partial `1.2` = `1.2.x`); a bare version of three
 *   or four parts is exact (`1.2.3` = `1.2.3.0`; write `1.2.3.x` for every fourth part);
 * - `^1.4` (below the next change of the first non-zero part given), `~1.2.3` (below the next minor).
 * Pre-releases are ordered, not excluded: `>=1.2.0` holds for 1.3.0-beta.1 (node-semver would
 * exclude it); the upper bound of `^`, `~` and x-ranges stops below every pre-release of the
 * bumped version (`^1.4` excludes 2.0.0-rc.1); an explicit `<2.0.0` includes 2.0.0-rc.1.
 */

/** Longest accepted range text (characters). */
export const MAX_RANGE_LENGTH = 256;

type Op = '<' | '<=' | '>' | '>=';
/** One bound over version sort keys (versionSortKey): compared as strings. */
interface Comparator {
  op: Op;
  key: string;
}
/** Alternatives (`||`), each a conjunction of bounds (an empty one holds for every version). */
export interface VersionRange {
  source: string;
  sets: Comparator[][];
}

export type RangeParse = { ok: true; range: VersionRange } | { ok: false; message: string };

const PARTIAL =
  /^(\d{1,9}|[xX*])(?:\.(\d{1,9}|[xX*]))?(?:\.(\d{1,9}|[xX*]))?(?:\.(\d{1,9}|[xX*]))?(-[0-9A-Za-z-.]+)?(\+[0-9A-Za-z-.]+)?$/;

interface Partial {
  /** The numeric parts given before the first wildcard. */
  given: number[];
  /** The whole version when every part given is numeric (with its pre-release). */
  exact: ParsedVersion | null;
}

function parsePartial(text: string): Partial | null {
  const m = PARTIAL.exec(text);
  if (!m) return null;
  const raw = [m[1], m[2], m[3], m[4]].filter((p): p is string => p !== undefined);
  const wild = raw.findIndex((p) => /^[xX*]$/.test(p));
  const given = (wild === -1 ? raw : raw.slice(0, wild)).map(Number);
  if (m[5] && wild !== -1) return null;
  const exact = wild === -1 ? parseVersion(text) : null;
  if (wild === -1 && !exact) return null;
  return { given, exact };
}

const pad = (parts: number[]): ParsedVersion['parts'] => [parts[0] ?? 0, parts[1] ?? 0, parts[2] ?? 0, parts[3] ?? 0];
/** Key of the release with these parts. */
const releaseKey = (parts: number[]): string => versionSortKey({ parts: pad(parts), prerelease: [] });
/** Below every pre-release of these parts, above everything older (`!` + nothing sorts first). */
const floorKey = (parts: number[]): string => `${releaseKey(parts).slice(0, -1)}!`;
/** The parts with part `index` incremented and the rest dropped (zeros). */
const bump = (parts: number[], index: number): number[] => [...parts.slice(0, index), (parts[index] ?? 0) + 1];

/** Bounds of a partial as an x-range: `1.2` = [1.2.0, 1.3.0-0). */
function xRange(p: Partial): Comparator[] {
  if (p.given.length === 0) return [];
  return [
    { op: '>=', key: releaseKey(p.given) },
    { op: '<', key: floorKey(bump(p.given, p.given.length - 1)) },
  ];
}

const isWholeExact = (p: Partial): p is Partial & { exact: ParsedVersion } =>
  p.exact !== null && (p.given.length >= 3 || p.exact.prerelease.length > 0);

function comparatorsOf(token: string): Comparator[] | string {
  const m = /^(<=|>=|<|>|=|\^|~>?|)(.*)$/.exec(token)!;
  const op = m[1]!;
  const p = parsePartial(m[2]!);
  if (!p) return `"${m[2]}" is not a version or x-range`;
  const exactKey = p.exact ? versionSortKey(p.exact) : null;
  switch (op) {
    case '':
    case '=':
      return isWholeExact(p)
        ? [
            { op: '>=', key: exactKey! },
            { op: '<=', key: exactKey! },
          ]
        : xRange(p);
    case '>=':
      return p.given.length === 0 ? [] : [{ op: '>=', key: exactKey ?? releaseKey(p.given) }];
    case '<=':
      if (isWholeExact(p)) return [{ op: '<=', key: exactKey! }];
      return p.given.length === 0 ? [] : [{ op: '<', key: floorKey(bump(p.given, p.given.length - 1)) }];
    case '>':
      if (isWholeExact(p)) return [{ op: '>', key: exactKey! }];
      // `>1.2` = at least 1.3.0; `>*` holds for nothing.
      return p.given.length === 0
        ? [{ op: '<', key: '' }]
        : [{ op: '>=', key: releaseKey(bump(p.given, p.given.length - 1)) }];
    case '<':
      if (isWholeExact(p)) return [{ op: '<', key: exactKey! }];
      // `<1.2` (a partial) stops below every 1.2.0 pre-release, as an x-range would.
      return p.given.length === 0 ? [{ op: '<', key: '' }] : [{ op: '<', key: floorKey(p.given) }];
    case '^': {
      if (p.given.length === 0) return [];
      const first = p.given.findIndex((n) => n !== 0);
      const at = first === -1 ? p.given.length - 1 : first;
      return [
        { op: '>=', key: exactKey ?? releaseKey(p.given) },
        { op: '<', key: floorKey(bump(p.given, at)) },
      ];
    }
    case '~':
    case '~>': {
      if (p.given.length === 0) return [];
      const at = p.given.length >= 2 ? 1 : 0;
      return [
        { op: '>=', key: exactKey ?? releaseKey(p.given) },
        { op: '<', key: floorKey(bump(p.given, at)) },
      ];
    }
    default:
      return `unknown operator "${op}"`;
  }
}

function parseSet(text: string): Comparator[] | string {
  const trimmed = text.trim();
  if (trimmed === '') return [];
  const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(trimmed);
  if (hyphen) {
    const lo = comparatorsOf(`>=${hyphen[1]}`);
    const hi = comparatorsOf(`<=${hyphen[2]}`);
    if (typeof lo === 'string') return lo;
    if (typeof hi === 'string') return hi;
    return [...lo, ...hi];
  }
  // `>= 1.2` is one comparator, as in node-semver.
  const tokens = trimmed.replace(/(<=|>=|<|>|=|\^|~>?)\s+/g, '$1').split(/\s+/);
  const out: Comparator[] = [];
  for (const t of tokens) {
    const c = comparatorsOf(t);
    if (typeof c === 'string') return c;
    out.push(...c);
  }
  return out;
}

/** Parses a range; a clear message when it is not one. */
export function parseVersionRange(text: string): RangeParse {
  if (typeof text !== 'string') return { ok: false, message: 'must be a string' };
  if (text.length > MAX_RANGE_LENGTH) return { ok: false, message: `is longer than ${MAX_RANGE_LENGTH} characters` };
  if (text.trim() === '') return { ok: false, message: 'is empty (leave it out, or use "*", for any version)' };
  const sets: Comparator[][] = [];
  for (const part of text.split('||')) {
    const set = parseSet(part);
    if (typeof set === 'string') return { ok: false, message: set };
    sets.push(set);
  }
  return { ok: true, range: { source: text.trim(), sets } };
}

function holds(c: Comparator, key: string): boolean {
  switch (c.op) {
    case '<':
      return key < c.key;
    case '<=':
      return key <= c.key;
    case '>':
      return key > c.key;
    case '>=':
      return key >= c.key;
  }
}

/** Whether the version satisfies the range; null range = any version; an invalid version satisfies nothing. */
export function satisfiesRange(version: string, range: VersionRange | null): boolean {
  if (range === null) return true;
  if (version.length > MAX_VERSION_LENGTH) return false;
  const parsed = parseVersion(version);
  if (!parsed) return false;
  const key = versionSortKey(parsed);
  return range.sets.some((set) => set.every((c) => holds(c, key)));
}
