import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder that holds the service's package.json, found from a module's URL: the repository
 * when the service runs from its sources (tsx, vitest), the artifact folder when it runs from
 * `npm run build`'s output. Files the service reads at run time (the GraphQL schema, the built
 * portal) keep their repository paths below this folder in both, so one lookup serves both; a
 * path relative to the module would not, since the build bundles every module into files
 * elsewhere.
 */
export function appRoot(moduleUrl: string): string {
  const start = path.dirname(fileURLToPath(moduleUrl));
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${start}`);
  }
}
