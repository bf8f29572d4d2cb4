import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each file starts real servers on an embedded database of its own (PGlite takes seconds).
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores on the target machines: two files at a time.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
