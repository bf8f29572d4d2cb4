import { parseVersion, versionSortKey } from '#protocol/version';
import { parseVersionRange, satisfiesRange, type VersionRange } from '../firmware/version-range';

/**
 * Upgrade-path planning (docs/ota.md "Upgrade paths"), pure. A version may be installed directly
 * on a device whose version satisfies its `upgrade_from` (null: any). When the target does not
 * allow the device's version, the path is the shortest chain of stepping stones, each allowing
 * the one before:
 * - stepping stones are versions of the same model in the account with a binary, releases only
 *   (no pre-release), strictly between the device's version and the target in version order
 *   (an upgrade never overshoots the target, a rollback never undershoots its old version);
 * - fewest hops first; among equally short paths the newest: the hop versions compared one by
 *   one from the first hop, the greater version wins at the first difference (so the device
 *   leaves its old version for the newest stepping stone that still leads to the target in as
 *   few hops).
 * A stored range that no longer parses allows nothing (the API refuses such ranges).
 */

export interface PathVersion {
  id: string;
  version: string;
  /** Its `upgrade_from`; null: any version may install it. */
  upgradeFrom: string | null;
}

export type UpgradePlan<V extends PathVersion = PathVersion> =
  /** The device already runs the target. */
  | { kind: 'already' }
  /** The target allows the device's version: one hop, as before upgrade paths existed. */
  | { kind: 'direct' }
  /** Hops in order; the last is the target. */
  | { kind: 'path'; hops: V[] }
  | { kind: 'no_upgrade_path' };

const NEVER: VersionRange = { source: '<0', sets: [[{ op: '<', key: '' }]] };
const rangeCache = new Map<string, VersionRange>();

/** The parsed range of a stored `upgrade_from` (cached: plans run per dispatch page). */
export function rangeOf(upgradeFrom: string | null): VersionRange | null {
  if (upgradeFrom === null) return null;
  let range = rangeCache.get(upgradeFrom);
  if (!range) {
    const parsed = parseVersionRange(upgradeFrom);
    range = parsed.ok ? parsed.range : NEVER;
    if (rangeCache.size > 1000) rangeCache.clear();
    rangeCache.set(upgradeFrom, range);
  }
  return range;
}

/** Whether a device on `from` may install `to` directly. */
export function allowsDirect(to: Pick<PathVersion, 'upgradeFrom'>, from: string): boolean {
  return satisfiesRange(from, rangeOf(to.upgradeFrom));
}

const keyOf = (version: string): string | null => {
  const parsed = parseVersion(version);
  return parsed ? versionSortKey(parsed) : null;
};

/**
 * The plan for a device on `from` to reach `target`, over `versions` (the model's versions with a
 * binary; the target may be among them). An unparseable `from` has no path.
 */
export function planUpgradePath<V extends PathVersion>(input: {
  from: string;
  target: V;
  versions: readonly V[];
}): UpgradePlan<V> {
  const { from, target } = input;
  const fromKey = keyOf(from);
  const targetKey = keyOf(target.version);
  if (fromKey === null || targetKey === null) return { kind: 'no_upgrade_path' };
  if (fromKey === targetKey) return { kind: 'already' };
  if (allowsDirect(target, from)) return { kind: 'direct' };
  const [lo, hi] = fromKey < targetKey ? [fromKey, targetKey] : [targetKey, fromKey];
  // One stepping stone per version (the first record of a duplicate key wins), newest first.
  const stones = new Map<string, V>();
  for (const v of input.versions) {
    const parsed = parseVersion(v.version);
    if (!parsed || parsed.prerelease.length > 0) continue;
    const k = versionSortKey(parsed);
    if (k > lo && k < hi && !stones.has(k)) stones.set(k, v);
  }
  const nodes = [...stones.entries()].sort((a, b) => (a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : 0)).map(([, v]) => v);
  // Hops from each stepping stone to the target, by breadth-first search backwards from it.
  const toTarget = new Map<V, number>();
  let frontier: PathVersion[] = [target];
  for (let depth = 1; frontier.length > 0; depth++) {
    const next: V[] = [];
    for (const v of nodes) {
      if (toTarget.has(v)) continue;
      if (frontier.some((f) => allowsDirect(f, v.version))) {
        toTarget.set(v, depth);
        next.push(v);
      }
    }
    frontier = next;
  }
  // First hops the device may take; the shortest, newest among them (nodes are newest first).
  let best: V | undefined;
  for (const v of nodes) {
    const d = toTarget.get(v);
    if (d === undefined || !allowsDirect(v, from)) continue;
    if (best === undefined || d < toTarget.get(best)!) best = v;
  }
  if (best === undefined) return { kind: 'no_upgrade_path' };
  const hops: V[] = [best];
  for (let current = best; toTarget.get(current)! > 1;) {
    const want = toTarget.get(current)! - 1;
    current = nodes.find((v) => toTarget.get(v) === want && allowsDirect(v, current.version))!;
    hops.push(current);
  }
  hops.push(target);
  return { kind: 'path', hops };
}
