import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { generate } from '@graphql-codegen/cli';
import config from '#codegen';

const root = path.resolve(__dirname, '../..');

/**
 * The generated types are committed (start and typecheck need no generation step), so a change
 * to the schema or to a portal document must come with `npm run codegen`. This runs codegen in
 * memory with the same config and compares.
 */
describe('generated GraphQL types', () => {
  it('match the schema and the portal documents (run `npm run codegen` when this fails)', async () => {
    // generate() is typed loosely (it also serves watch mode); without saving it answers the files.
    const outputs: { filename: string; content: string }[] = await generate(
      { ...config, cwd: root, silent: true },
      false,
    );
    expect(outputs.map((o) => o.filename).sort()).toEqual(Object.keys(config.generates).sort());
    for (const { filename, content } of outputs) {
      const committed = readFileSync(path.join(root, filename), 'utf8');
      expect(committed === content, `${filename} is out of date: run npm run codegen`).toBe(true);
    }
  }, 60_000);
});
