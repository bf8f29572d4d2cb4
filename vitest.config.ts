import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // One graphql module instance: Node loads graphql's CommonJS entry for packages
    // (@graphql-tools, graphql-ws), Vite would give our sources the .mjs one, and graphql then
    // refuses a schema "from another module or realm".
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // The portal built once, one migrated embedded database copied by every test database.
    globalSetup: ['test/helpers/global-setup.ts'],
    // Each file starts real servers on an embedded database of its own (PGlite takes seconds).
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores on the target machines: two files at a time.
    maxWorkers: 2,
    reporters: ['default'],
    // expect.poll waits for something a user would see change; 1 s (the default) is too short
    // on two busy cores (a portal status poll flaked in CI while the other file ran an OTA load).
    expect: { poll: { timeout: 10_000 } },
  },
});
