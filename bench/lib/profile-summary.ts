import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Where a V8 CPU profile (.cpuprofile, from --cpu-prof or a benchmark's --profile) spent its
 * time: self time by function and by package or source folder, and inclusive time (the function
 * and what it called) by function, largest first.
 *
 *   node --import tsx bench/lib/profile-summary.ts FILE.cpuprofile [--top N]
 */
export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** One row of a summary: µs and share of all sampled time. */
export interface Share {
  key: string;
  micros: number;
  percent: number;
}

export interface ProfileSummary {
  /** All sampled time (µs), idle included. */
  totalMicros: number;
  /** Sampled time the process was busy (µs): everything but V8's `(idle)` node. */
  busyMicros: number;
  /** Self time by package (`node_modules/<name>`), `node:` module, or our source folder. */
  selfByPlace: Share[];
  /** Self time by function, keyed `name place:line`. */
  selfByFunction: Share[];
  /** Inclusive time by function (counted once per sample, however deep the recursion). */
  inclusiveByFunction: Share[];
}

/** What a script URL is grouped under: its package, `node:` module, or its folder in our tree. */
export function placeOf(url: string): string {
  if (url === '') return '(native or V8)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  if (url.startsWith('node:')) return url;
  const own = /\/work\/[^/]+\/(.+)\/[^/]+$/.exec(url.replace('file://', ''));
  return own ? own[1]! : url;
}

function functionKey(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url === '' ? placeOf(url) : `${placeOf(url)}/${url.slice(url.lastIndexOf('/') + 1)}`;
  return `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
}

export function summarizeProfile(profile: Profile, top = 25): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const selfMicros = new Map<number, number>();
  profile.samples.forEach((id, i) => selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const totalMicros = [...selfMicros.values()].reduce((a, b) => a + b, 0);

  const add = (map: Map<string, number>, key: string, micros: number) => map.set(key, (map.get(key) ?? 0) + micros);
  const functions = new Map<string, number>();
  const places = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let idle = 0;
  for (const [id, micros] of selfMicros) {
    const node = byId.get(id);
    if (!node) continue;
    if (node.callFrame.functionName === '(idle)') idle += micros;
    add(functions, functionKey(node), micros);
    add(places, placeOf(node.callFrame.url), micros);
    // Each function on the sample's stack once: a recursive one is not counted twice.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const key = functionKey(byId.get(at)!);
      if (seen.has(key)) continue;
      seen.add(key);
      add(inclusive, key, micros);
    }
  }
  const rows = (map: Map<string, number>): Share[] =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([key, micros]) => ({ key, micros, percent: totalMicros ? (100 * micros) / totalMicros : 0 }));
  inclusive.delete(functionKey(profile.nodes[0]!)); // the (root) node: always 100 %
  return {
    totalMicros,
    busyMicros: totalMicros - idle,
    selfByPlace: rows(places),
    selfByFunction: rows(functions),
    inclusiveByFunction: rows(inclusive),
  };
}

export function formatSummary(summary: ProfileSummary): string {
  const lines = [
    `${(summary.totalMicros / 1000).toFixed(0)} ms sampled, ${(summary.busyMicros / 1000).toFixed(0)} ms busy (${((100 * summary.busyMicros) / Math.max(1, summary.totalMicros)).toFixed(1)} %)`,
  ];
  const table = (title: string, shares: Share[]) => {
    lines.push('', title);
    for (const s of shares)
      lines.push(`${s.percent.toFixed(1).padStart(5)} %  ${(s.micros / 1000).toFixed(0).padStart(6)} ms  ${s.key}`);
  };
  table('self time by package or folder', summary.selfByPlace);
  table('self time by function', summary.selfByFunction);
  table('inclusive time by function', summary.inclusiveByFunction);
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file] = process.argv.slice(2).filter((a) => !a.startsWith('--') && !/^\d+$/.test(a));
  if (!file) throw new Error('usage: profile-summary FILE.cpuprofile [--top N]');
  const at = process.argv.indexOf('--top');
  const top = (at > 0 && Number(process.argv[at + 1])) || 25;
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  console.log(`${file}: ${formatSummary(summarizeProfile(profile, top))}`);
}
