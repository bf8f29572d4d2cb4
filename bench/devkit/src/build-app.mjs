// esbuild bundles for the kit: the fleet service (api/src/main.ts), its operator CLI
// (api/src/cli/fleet.ts) and the mqtt.js load generator (src/gen.mjs).
// usage: node build-app.mjs MAIN_REPO APP_OUT_DIR GEN_SOURCE GEN_OUT_DIR
// The bundles are one file each (no code splitting), so that `import.meta.url` is the bundle's
// own folder: PGlite finds pglite.wasm/pglite.data/initdb.wasm there and the GraphQL schema
// loader finds schema/*.graphql there (make-kit.sh copies them beside the bundle). The portal
// (portal/dist) is not shipped: the service answers 503 on portal pages and serves everything else.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [main, appOut, genSrc, genOut] = process.argv.slice(2);
const esbuild = await import(pathToFileURL(path.join(main, 'node_modules/esbuild/lib/main.js')).href);

// broker/src/cluster/aedes-cluster.ts loads mqemitter-redis with createRequire(import.meta.url), a
// runtime require that cannot see into a bundle. Dropping that one line leaves a plain require(),
// which esbuild bundles (same module, same export).
const fixCreateRequire = {
  name: 'fix-create-require',
  setup(build) {
    build.onLoad({ filter: /broker[\\/]src[\\/]cluster[\\/]aedes-cluster\.ts$/ }, async (args) => {
      const src = await fs.promises.readFile(args.path, 'utf8');
      const out = src.replace(/^const require = createRequire\(import\.meta\.url\);$/m, '');
      if (out === src) throw new Error('aedes-cluster.ts: the createRequire line was not found');
      return { contents: out, loader: 'ts' };
    });
  },
};
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  outExtension: { '.js': '.mjs' },
  legalComments: 'none',
  logLevel: 'warning',
  // CommonJS dependencies call require() for Node built-ins: give the ESM bundle a real require.
  banner: { js: "import { createRequire as __kitCreateRequire } from 'node:module'; const require = __kitCreateRequire(import.meta.url);" },
};
const r1 = await esbuild.build({
  ...common,
  absWorkingDir: main,
  entryPoints: { main: 'api/src/main.ts', fleet: 'api/src/cli/fleet.ts' },
  outdir: appOut,
  metafile: true,
  // knex's other dialects and optional native add-ons: required lazily, never on our path
  external: ['pg-native', 'sqlite3', 'better-sqlite3', 'mysql', 'mysql2', 'mariadb', 'mariadb/callback', 'oracledb', 'tedious',
    'pg-query-stream', 'bufferutil', 'utf-8-validate', 'supports-color'],
  plugins: [fixCreateRequire],
});
const inputs = Object.keys(r1.metafile.inputs);
if (!inputs.some((p) => p.includes('mqemitter-redis'))) throw new Error('mqemitter-redis is not in the bundle');
// bare Aedes, the per-core baseline (src/bare-aedes.mjs), resolved from the project's node_modules
await esbuild.build({
  ...common,
  absWorkingDir: main,
  entryPoints: { 'bare-aedes': path.join(path.dirname(genSrc), 'bare-aedes.mjs') },
  nodePaths: [path.join(main, 'node_modules')],
  outdir: appOut,
  external: ['bufferutil', 'utf-8-validate'],
});
const r2 = await esbuild.build({
  ...common,
  absWorkingDir: main, // resolve mqtt from the project's node_modules (mqtt 5, as acceptance/loadgen.mjs uses)
  entryPoints: { gen: genSrc },
  nodePaths: [path.join(main, 'node_modules')],
  outdir: genOut,
  external: ['bufferutil', 'utf-8-validate'],
});
// worker threads the service starts by path below its package root (core/shared/app-root.ts):
// server/pglite-thread.js (the embedded database) and server/delta-worker.js
await esbuild.build({
  ...common,
  absWorkingDir: main,
  entryPoints: { 'server/pglite-thread': 'core/db/pglite-thread.ts', 'server/delta-worker': 'core/firmware/delta/delta-worker.ts' },
  outdir: appOut,
  outExtension: { '.js': '.js' },
  external: ['bufferutil', 'utf-8-validate'],
});
fs.writeFileSync(path.join(appOut, 'package.json'), JSON.stringify({ name: 'fleet-kit-app', private: true, type: 'module' }));
console.log(`bundled: ${inputs.length} modules into main.mjs/fleet.mjs; generator ${r2.errors.length ? 'FAILED' : 'ok'}`);
