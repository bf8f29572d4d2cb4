import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folder of the SDL files: the schema is written in `.graphql`, the single source for server, docs and portal. */
export const SCHEMA_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'schema');

/** Every `schema/*.graphql` file's text, in a stable order (base first: it declares the roots). */
export function loadTypeDefs(): string[] {
  const files = readdirSync(SCHEMA_DIR)
    .filter((f) => f.endsWith('.graphql'))
    .sort((a, b) => (a === 'base.graphql' ? -1 : b === 'base.graphql' ? 1 : a.localeCompare(b)));
  return files.map((f) => readFileSync(path.join(SCHEMA_DIR, f), 'utf8'));
}
