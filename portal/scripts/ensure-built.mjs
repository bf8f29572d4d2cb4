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
  const sources = ['src', 'index.html', 'vite.config.ts', 'tsconfig.json'].map((p) => path.join(portal, p)).filter((p) => fs.existsSync(p));
  return sources.some((p) => newestMtime(p) > built);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  if (!portalIsStale()) process.exit(0);
  console.log('Building the portal (portal/dist is missing or older than portal/src)...');
  const vite = path.join(portal, '..', 'node_modules', 'vite', 'bin', 'vite.js');
  const result = spawnSync(process.execPath, [vite, 'build', portal, '--logLevel', 'warn'], { stdio: 'inherit' });
  if (result.status !== 0) {
    console.error('The portal build failed; the API still starts, the portal answers 503 until it is built.');
  }
}
