/**
 * `npm run build [-- --out DIR]`: the production artifact (docs/production.md). A folder that runs
 * on plain Node after `npm ci --omit=dev` in it: no TypeScript, no tsx, no build tools.
 *
 *   DIR/package.json, package-lock.json  the runtime dependencies only, versions from the root lock
 *   DIR/server/main.js                   the service (api/src/main.ts), ESM, with source maps
 *   DIR/server/fleet.js, bin/fleet.js    the operator's CLI (api/src/cli/fleet.ts)
 *   DIR/server/delta-worker.js           the worker thread that builds delta images
 *   DIR/api/src/graphql/schema/          the GraphQL SDL files the service reads at start
 *   DIR/portal/dist/                     the portal (vite build)
 *
 * esbuild bundles the service's own modules and leaves every npm package external, so the
 * `#core/*` aliases and the extensionless relative imports the sources use (moduleResolution
 * Bundler, as tsx and vitest read them) are resolved at build time; tsc alone would emit imports
 * plain Node cannot load. Files read at run time keep their repository paths below the package
 * root (core/shared/app-root.ts finds it the same way in both). esbuild does not type-check:
 * `npm run typecheck` does (CI runs both).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build, type Metafile } from 'esbuild';

const root = path.resolve(import.meta.dirname, '..');

/**
 * Root dependencies the artifact leaves out: tsx runs TypeScript (the artifact is JavaScript);
 * vue, @apollo/client and rxjs are the portal's, compiled into portal/dist by vite. The build
 * fails if the server imports one of them.
 */
const NOT_AT_RUN_TIME = ['tsx', 'vue', '@apollo/client', 'rxjs'];

/** Marks a folder this script wrote: only such a folder (or an empty one) is emptied by a new build. */
const BUILD_INFO = 'build-info.json';

interface RootPackage {
  name: string;
  version: string;
  description?: string;
  engines?: Record<string, string>;
  dependencies: Record<string, string>;
  overrides?: Record<string, unknown>;
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** The output folder, emptied; refuses a folder that holds anything but an earlier build. */
function prepareOut(out: string): void {
  const relative = path.relative(out, root);
  if (relative === '' || !relative.startsWith('..'))
    throw new Error(`--out ${out} is the repository or a folder above it; choose a folder of its own (default: dist)`);
  if (fs.existsSync(out) && fs.readdirSync(out).length > 0 && !fs.existsSync(path.join(out, BUILD_INFO)))
    throw new Error(`--out ${out} is not empty and holds no earlier build (${BUILD_INFO}); refusing to empty it`);
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
}

/** `@scope/name/sub` -> `@scope/name`, `name/sub` -> `name`; null for Node's built-in modules. */
function packageOf(specifier: string): string | null {
  if (specifier.startsWith('node:') || builtinModules.includes(specifier)) return null;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

function importedPackages(metafile: Metafile): Set<string> {
  const names = new Set<string>();
  for (const output of Object.values(metafile.outputs))
    for (const imported of output.imports) {
      if (!imported.external) continue;
      const name = packageOf(imported.path);
      if (name) names.add(name);
    }
  return names;
}

function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): void {
  const result = spawnSync(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: 'inherit' });
  if (result.status !== 0)
    throw new Error(`${[command, ...args].join(' ')} failed (${result.error?.message ?? `exit ${result.status}`})`);
}

/** npm itself: the one running `npm run build` when there is one, otherwise the one on PATH. */
function npm(args: string[], cwd: string): void {
  const npmCli = process.env.npm_execpath;
  if (npmCli && /\.[cm]?js$/.test(npmCli)) run(process.execPath, [npmCli, ...args], { cwd });
  else run('npm', args, { cwd });
}

async function compileServer(out: string): Promise<Set<string>> {
  const result = await build({
    absWorkingDir: root,
    entryPoints: {
      'server/main': 'api/src/main.ts',
      'server/fleet': 'api/src/cli/fleet.ts',
      // The delta builder's worker thread (core/firmware/delta/delta-builder.ts loads it by this name).
      'server/delta-worker': 'core/firmware/delta/delta-worker.ts',
      // The embedded database's thread (core/db/pglite-worker-client.ts loads it by this name).
      'server/pglite-thread': 'core/db/pglite-thread.ts',
    },
    outdir: out,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    // npm packages stay packages (installed by `npm ci --omit=dev`); only our modules are bundled.
    packages: 'external',
    chunkNames: 'server/chunks/[name]-[hash]',
    sourcemap: true,
    sourcesContent: false,
    metafile: true,
    logLevel: 'warning',
  });
  return importedPackages(result.metafile);
}

function buildPortal(out: string): void {
  // Straight into the artifact: the repository's portal/dist (what `npm start` and the tests
  // serve) is left alone. NODE_ENV=production whatever the caller's (vitest sets `test`, and Vite
  // keeps a NODE_ENV it finds: Vue's development build would ship).
  const vite = path.join(root, 'node_modules', 'vite', 'bin', 'vite.js');
  run(
    process.execPath,
    [vite, 'build', 'portal', '--outDir', path.join(out, 'portal', 'dist'), '--emptyOutDir', '--logLevel', 'warn'],
    { cwd: root, env: { ...process.env, NODE_ENV: 'production' } },
  );
}

function copySchema(out: string): void {
  const from = path.join(root, 'api', 'src', 'graphql', 'schema');
  const to = path.join(out, 'api', 'src', 'graphql', 'schema');
  fs.mkdirSync(to, { recursive: true });
  for (const file of fs.readdirSync(from).filter((f) => f.endsWith('.graphql')))
    fs.copyFileSync(path.join(from, file), path.join(to, file));
}

function writePackage(out: string, pkg: RootPackage, imported: Set<string>): void {
  const undeclared = [...imported].filter((name) => !(name in pkg.dependencies)).sort();
  if (undeclared.length > 0)
    throw new Error(
      `the server imports ${undeclared.join(', ')}, which package.json does not list in "dependencies": ` +
        'a production install would not have it. Add it to "dependencies".',
    );
  const dropped = NOT_AT_RUN_TIME.filter((name) => imported.has(name));
  if (dropped.length > 0)
    throw new Error(`the server imports ${dropped.join(', ')}, which the artifact leaves out (NOT_AT_RUN_TIME)`);
  const dependencies = Object.fromEntries(
    Object.entries(pkg.dependencies).filter(([name]) => !NOT_AT_RUN_TIME.includes(name)),
  );
  const artifact = {
    name: pkg.name,
    version: pkg.version,
    private: true,
    description: pkg.description,
    type: 'module',
    engines: pkg.engines,
    bin: { fleet: 'bin/fleet.js' },
    scripts: { start: 'node --enable-source-maps server/main.js' },
    dependencies,
    ...(pkg.overrides ? { overrides: pkg.overrides } : {}),
  };
  fs.writeFileSync(path.join(out, 'package.json'), JSON.stringify(artifact, null, 2) + '\n');

  const bin = path.join(out, 'bin', 'fleet.js');
  fs.mkdirSync(path.dirname(bin), { recursive: true });
  fs.writeFileSync(bin, "#!/usr/bin/env node\nimport '../server/fleet.js';\n", { mode: 0o755 });

  // The artifact's lock: the root lock pruned to the runtime dependencies, so production installs
  // exactly the versions the tests ran with. Offline when the npm cache has them (it does after
  // the root's `npm ci`), the registry otherwise.
  fs.copyFileSync(path.join(root, 'package-lock.json'), path.join(out, 'package-lock.json'));
  npm(['install', '--package-lock-only', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], out);
}

function gitCommit(): string | null {
  const result = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : null;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { out: { type: 'string', default: 'dist' } } });
  const out = path.resolve(root, values.out);
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as RootPackage;
  const started = Date.now();

  prepareOut(out);
  log(`Building ${pkg.name} ${pkg.version} into ${out}`);
  const imported = await compileServer(out);
  log(`  server and CLI compiled (${imported.size} packages imported)`);
  buildPortal(out);
  log('  portal built');
  copySchema(out);
  writePackage(out, pkg, imported);
  fs.writeFileSync(
    path.join(out, BUILD_INFO),
    JSON.stringify({ version: pkg.version, commit: gitCommit(), builtAt: new Date().toISOString() }, null, 2) + '\n',
  );
  log(`Built in ${((Date.now() - started) / 1000).toFixed(1)} s. To run it (docs/production.md):`);
  log(
    `  cd ${path.relative(process.cwd(), out) || '.'} && npm ci --omit=dev && node --enable-source-maps server/main.js`,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`build failed: ${(error as Error).message}\n`);
  process.exit(1);
});
