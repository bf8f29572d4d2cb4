import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * The layers of docs/architecture.md as rules over the import graph: pure functions over a list
 * of files, so each rule can be shown to fail on a small made-up tree (test/unit/architecture.test.ts)
 * before it is trusted to pass on the real one.
 */

export interface ImportEdge {
  /** As written: `'../shared/errors'`, `'#core/devices/device.service'`, `'zod'`. */
  spec: string;
  /** The repository path it resolves to (`core/shared/errors.ts`), or null for a package. */
  target: string | null;
}

export interface SourceFile {
  /** Repository path: `core/devices/device.service.ts`. */
  path: string;
  imports: ImportEdge[];
  /** The file's text, for the SQL rule. */
  text: string;
}

export const LAYERS = {
  protocol: 'protocol/',
  core: 'core/',
  edge: 'api/src/edge/',
  simulator: 'simulator/src/',
  migrations: 'migrations/',
} as const;

/** The adapters: each turns one transport into calls of the core's services. */
export const ADAPTERS: Record<string, string> = {
  graphql: 'api/src/graphql/',
  http: 'api/src/http/',
  rest: 'rest-facade/src/',
  broker: 'broker/src/',
};

/** The HTTP adapters share the HTTP edge (caller, rate limit, problem details, idempotency). */
const EDGE_USERS = new Set(['graphql', 'http', 'rest']);

/** The composition root: the only code that wires adapters together. */
const ROOT = 'api/src/';

/** What the core may import beyond itself and the protocol: the list of migrations it runs. */
const MIGRATION_LIST = 'migrations/index.ts';

/** SQL in a query builder or a raw statement (also a typed `.raw<Row>(` and `(trx ?? knex)(`). */
const SQL = /\b(?:knex|trx|db)\s*\)?\s*\(|\.raw\s*[<(]/;

const under = (file: string, folder: string) => file.startsWith(folder);
const adapterOf = (file: string) => Object.keys(ADAPTERS).find((name) => under(file, ADAPTERS[name]!));
const topFolder = (file: string) => file.split('/')[0]!;
/** `core/devices/store/x.ts` -> `devices`; null outside an area. */
const areaOf = (file: string) =>
  under(file, LAYERS.core) ? (file.split('/').length > 2 ? file.split('/')[1]! : null) : null;
const inStore = (file: string) => file.split('/').includes('store');

export function layerViolations(files: SourceFile[]): string[] {
  const out: string[] = [];
  for (const file of files) {
    const own = file.path;
    for (const edge of file.imports) {
      const target = edge.target;
      const to = `${own} -> ${edge.spec}`;
      if (edge.spec.startsWith('.') && target && topFolder(target) !== topFolder(own))
        out.push(`relative import leaves ${topFolder(own)}/: ${to} (use a #alias)`);
      if (under(own, LAYERS.protocol)) {
        if (target === null ? edge.spec !== 'zod' : !under(target, LAYERS.protocol))
          out.push(`protocol imports only zod: ${to}`);
        continue;
      }
      if (target === null) continue;
      if (under(own, LAYERS.core)) {
        if (!under(target, LAYERS.core) && !under(target, LAYERS.protocol) && target !== MIGRATION_LIST)
          out.push(`core imports only the core, the protocol and the migration list: ${to}`);
        const from = areaOf(own);
        const into = areaOf(target);
        if (into && into !== from && into !== 'shared' && inStore(target))
          out.push(`an area calls another area's services, never its store: ${to}`);
        continue;
      }
      if (under(own, LAYERS.edge)) {
        if (!under(target, LAYERS.core) && !under(target, LAYERS.protocol) && !under(target, LAYERS.edge))
          out.push(`the HTTP edge imports only the core and the protocol: ${to}`);
        continue;
      }
      if (under(own, LAYERS.simulator)) {
        if (!under(target, LAYERS.simulator) && !under(target, LAYERS.protocol))
          out.push(`the simulator imports only the protocol: ${to}`);
        continue;
      }
      const adapter = adapterOf(own);
      if (adapter) {
        const other = adapterOf(target);
        if (other && other !== adapter) out.push(`adapters never import each other: ${to}`);
        else if (under(target, LAYERS.edge) && !EDGE_USERS.has(adapter))
          out.push(`only the HTTP adapters use the HTTP edge: ${to}`);
        else if (!other && under(target, ROOT) && !under(target, LAYERS.edge))
          out.push(`adapters never import the composition root: ${to}`);
        else if (under(target, LAYERS.simulator)) out.push(`adapters never import the simulator: ${to}`);
        continue;
      }
      if (under(own, LAYERS.migrations) && !under(target, LAYERS.migrations))
        out.push(`migrations import no application code: ${to}`);
    }
    if (under(own, LAYERS.core) && !inStore(own) && !under(own, 'core/db/') && SQL.test(file.text))
      out.push(`SQL only in a store/ folder of the core: ${own}`);
  }
  return out;
}

/** Files whose imports the rules read (tests and benchmarks keep only the relative-import rule). */
const SOURCE_ROOTS = [
  'core',
  'protocol',
  'api/src',
  'broker/src',
  'rest-facade/src',
  'simulator/src',
  'migrations',
  'test',
  'bench',
];
const GENERATED = /\/generated\//;

export function readSourceTree(root: string): SourceFile[] {
  const aliases = Object.entries(
    (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { imports: Record<string, string> }).imports,
  );
  const walk = (dir: string): string[] =>
    readdirSync(path.join(root, dir)).flatMap((name) => {
      const rel = `${dir}/${name}`;
      if (statSync(path.join(root, rel)).isDirectory()) return name === 'node_modules' ? [] : walk(rel);
      return /\.(ts|mts|js|mjs)$/.test(name) && !name.endsWith('.d.ts') && !GENERATED.test(rel) ? [rel] : [];
    });
  const exists = (rel: string) => {
    try {
      return statSync(path.join(root, rel)).isFile();
    } catch {
      return false;
    }
  };
  const resolve = (from: string, spec: string): string | null => {
    let base: string | null = null;
    if (spec.startsWith('.')) base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
    for (const [alias, target] of aliases) {
      const prefix = alias.replace(/\*$/, '');
      if (alias.endsWith('*') ? spec.startsWith(prefix) : spec === alias)
        return path.posix.normalize(target.replace('*', spec.slice(prefix.length)));
    }
    if (base === null) return null;
    return [base, `${base}.ts`, `${base}/index.ts`].find(exists) ?? base;
  };
  const specifiers = /\b(?:from|import)\s*\(?\s*['"]([^'"]+)['"]|\brequire\s*\(\s*['"]([^'"]+)['"]/g;
  return SOURCE_ROOTS.flatMap(walk).map((file) => {
    const text = readFileSync(path.join(root, file), 'utf8');
    const imports = [...text.matchAll(specifiers)].map((m) => {
      const spec = (m[1] ?? m[2])!;
      return { spec, target: resolve(file, spec) };
    });
    return { path: file, imports, text };
  });
}
