import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { appRoot } from '#core/shared/app-root';

/**
 * Folder of the SDL files: the schema is written in `.graphql`, the single source for server, docs
 * and portal. Found from the package root, where `npm run build` copies it too.
 */
export const SCHEMA_DIR = path.join(appRoot(import.meta.url), 'api', 'src', 'graphql', 'schema');

/**
 * The SDL files, one per area (each paired with `resolvers/<area>.resolvers.ts`), in the order
 * they are loaded. base.graphql comes first: it declares the roots and the scalars the others
 * extend. The schema prints its types and root fields in this order (printSchema keeps the order
 * of definition), so the order is fixed here rather than taken from the file names.
 */
export const SCHEMA_FILES = [
  'base.graphql',
  'certificates.graphql',
  'devices.graphql',
  'firmware.graphql',
  'deployments.graphql',
  'fleet.graphql',
  'accounts.graphql',
  'webhooks.graphql',
  'events.graphql',
  'sites.graphql',
  'update-locks.graphql',
  'deltas.graphql',
  'luminaire.graphql',
  'health.graphql',
] as const;

/** Every `schema/*.graphql` file's text in the order of SCHEMA_FILES; a file missing from the list (or from the folder) fails. */
export function loadTypeDefs(dir: string = SCHEMA_DIR): string[] {
  const present = readdirSync(dir).filter((f) => f.endsWith('.graphql'));
  const listed = new Set<string>(SCHEMA_FILES);
  const unlisted = present.filter((f) => !listed.has(f));
  const missing = SCHEMA_FILES.filter((f) => !present.includes(f));
  if (unlisted.length > 0 || missing.length > 0)
    throw new Error(
      `schema-files.ts: SCHEMA_FILES and ${dir} differ (not listed: ${unlisted.join(', ') || 'none'}; missing: ${missing.join(', ') || 'none'})`,
    );
  return SCHEMA_FILES.map((f) => readFileSync(path.join(dir, f), 'utf8'));
}
