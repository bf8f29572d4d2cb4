import { readFileSync } from 'node:fs';

/**
 * Where a V8 CPU profile (.cpuprofile, from --cpu-prof or a benchmark's --profile) spent its
 * time: self time by function and by package or source folder, largest first.
 *
 *   node --import tsx bench/lib/profile-summary.ts FILE.cpuprofile [--top N]
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
if (!file) throw new Error('usage: profile-summary FILE.cpuprofile [--top N]');
const top = Number(process.argv[process.argv.indexOf('--top') + 1]) || 25;
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfMicros = new Map<number, number>();
profile.samples.forEach((id, i) => selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...selfMicros.values()].reduce((a, b) => a + b, 0);

const where = (url: string): string => {
  if (url === '') return '(native or V8)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  if (url.startsWith('node:')) return url;
  const own = /\/work\/[^/]+\/(.+)\/[^/]+$/.exec(url.replace('file://', ''));
  return own ? own[1]! : url;
};
const add = (map: Map<string, number>, key: string, micros: number) => map.set(key, (map.get(key) ?? 0) + micros);
const functions = new Map<string, number>();
const places = new Map<string, number>();
for (const [id, micros] of selfMicros) {
  const node = byId.get(id);
  if (!node) continue;
  const { functionName, url, lineNumber } = node.callFrame;
  add(functions, `${functionName || '(anonymous)'} ${where(url)}:${lineNumber + 1}`, micros);
  add(places, where(url), micros);
}
const print = (title: string, map: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [key, micros] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(
      `${((100 * micros) / total).toFixed(1).padStart(5)} %  ${(micros / 1000).toFixed(0).padStart(6)} ms  ${key}`,
    );
};
console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled`);
print('self time by package or folder', places);
print('self time by function', functions);
