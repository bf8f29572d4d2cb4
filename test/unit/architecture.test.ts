import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(path.join(root, dir))) {
    const rel = path.join(dir, name);
    if (statSync(path.join(root, rel)).isDirectory()) out.push(...filesUnder(rel));
    else if (/\.(ts|vue)$/.test(name)) out.push(rel);
  }
  return out;
}

const importsOf = (file: string) =>
  [
    ...readFileSync(path.join(root, file), 'utf8').matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/gm),
  ].map((m) => m[1]!);
const resolvesInto = (file: string, spec: string, folder: string) =>
  spec.startsWith('.') &&
  path.resolve(path.dirname(path.join(root, file)), spec).startsWith(path.join(root, folder) + path.sep);

/**
 * The layering the code keeps: SQL only in stores beneath the domain
 * services, adapters that never import each other, and a device protocol module that depends
 * on nothing but zod.
 */
describe('architecture', () => {
  it('issues SQL under api/src/domain only from store/ folders', () => {
    // Also `.raw<Row>(` (a typed raw call) and `(trx ?? this.deps.knex)(` (a chosen connection).
    const sql = /\b(?:knex|trx|db)\s*\)?\s*\(|\.raw\s*[<(]/;
    const offenders = filesUnder('api/src/domain')
      .filter((f) => !f.split(path.sep).includes('store'))
      .filter((f) => sql.test(readFileSync(path.join(root, f), 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('keeps adapters apart: REST, GraphQL, the HTTP downloads and the broker never import each other', () => {
    // What the adapters share (caller authentication, rate-limit decisions, problem details,
    // the NUL guard) is the HTTP edge, api/src/edge: not an adapter, and it imports none of them.
    const adapters: Record<string, string[]> = {
      'rest-facade/src': ['api/src/graphql', 'api/src/http', 'broker/src'],
      'api/src/graphql': ['rest-facade/src', 'api/src/http', 'broker/src'],
      'api/src/http': ['rest-facade/src', 'api/src/graphql', 'broker/src'],
      'broker/src': ['rest-facade/src', 'api/src/graphql', 'api/src/http'],
      'api/src/edge': ['rest-facade/src', 'api/src/graphql', 'api/src/http', 'broker/src'],
    };
    const crossings: string[] = [];
    for (const [adapter, others] of Object.entries(adapters)) {
      for (const file of filesUnder(adapter)) {
        for (const spec of importsOf(file)) {
          const other = others.find((o) => resolvesInto(file, spec, o));
          if (other) crossings.push(`${file} -> ${other}`);
        }
      }
    }
    expect(crossings).toEqual([]);
  });

  it('keeps the device protocol module free of everything but zod', () => {
    // The protocol is what firmware engineers and the simulator build against: it may not pull in
    // the domain, the broker or Node. Side-effect imports, re-exports and dynamic imports count too.
    const specifiers = (file: string) => {
      const text = readFileSync(path.join(root, file), 'utf8');
      return [...text.matchAll(/\b(?:from|import)\s*\(?\s*['"]([^'"]+)['"]|\brequire\s*\(\s*['"]([^'"]+)['"]/g)].map(
        (m) => (m[1] ?? m[2])!,
      );
    };
    const files = filesUnder('broker/src/protocol');
    expect(files.length).toBeGreaterThan(0);
    const foreign = files.flatMap((file) =>
      specifiers(file)
        .filter((spec) => spec !== 'zod' && !resolvesInto(file, spec, 'broker/src/protocol'))
        .map((spec) => `${file} -> ${spec}`),
    );
    expect(foreign).toEqual([]);
  });
});
