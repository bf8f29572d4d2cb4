#!/usr/bin/env node
// Builds the portal when portal/dist is missing or older than its sources, so that
// `npm install && npm start` on a fresh clone serves a current portal. Plain JS: runs before tsx.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const portal = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const builtIndex = path.join(portal, 'dist', 'index.html');

function newestMtime(entry) {
  const stat = fs.statSync(entry);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = 0;
  for (const name of fs.readdirSync(entry)) newest = Math.max(newest, newestMtime(path.join(entry, name)));
  return newest;
}

export function portalIsStale() {
  if (!fs.existsSync(builtIndex)) return true;
  const built = fs.statSync(builtIndex).mtimeMs;
  const sources = ['src', 'index.html', 'vite.config.ts', 'tsconfig.json']
    .map((p) => path.join(portal, p))
    .filter((p) => fs.existsSync(p));
  return sources.some((p) => newestMtime(p) > built);
}

/** Two test files (or `npm start` beside a test run) must not build into the same folder at once. */
function withLock(fn) {
  const lock = path.join(portal, '.build-lock');
  const started = Date.now();
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      // Another process is building: wait for it (a lock older than 5 minutes is stale).
      try {
        if (Date.now() - fs.statSync(lock).mtimeMs > 300_000) fs.rmSync(lock, { recursive: true, force: true });
      } catch {
        // removed meanwhile
      }
      if (Date.now() - started > 300_000)
        throw new Error('Timed out waiting for another portal build (portal/.build-lock).');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 250);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const status = withLock(() => {
    // Checked inside the lock: a build that just finished elsewhere makes this one unnecessary.
    if (!portalIsStale()) return 0;
    console.log('Building the portal (portal/dist is missing or older than portal/src)...');
    const vite = path.join(portal, '..', 'node_modules', 'vite', 'bin', 'vite.js');
    // NODE_ENV=production whatever the caller's: Vite keeps a NODE_ENV it finds, and a build
    // started from the test run (vitest sets `test`) shipped Vue's development code, 35 KB more
    // gzipped on the first page, to every later `npm start` of that folder.
    const result = spawnSync(process.execPath, [vite, 'build', portal, '--logLevel', 'warn'], {
      stdio: 'inherit',
      env: { ...process.env, NODE_ENV: 'production' },
    });
    if (result.status !== 0)
      console.error('The portal build failed; the API still starts, the portal answers 503 until it is built.');
    return result.status ?? 1;
  });
  // `npm start` goes on without a portal (the API still works); tests pass --strict to fail.
  process.exitCode = process.argv.includes('--strict') ? status : 0;
}
