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
    // One worker process runs many files: a fresh process per file cost a fork and a fresh import
    // of the whole service per file (497 CPU-seconds for the suite against 311 reused, same 1,058
    // tests). Files keep their state apart themselves: each starts its own servers on its own
    // database and stops them in afterAll; nothing stubs modules or globals for another file.
    isolate: false,
    // Two cores on the target machines: two files at a time.
    maxWorkers: 2,
    reporters: ['default'],
    // `npm test` (and CI) runs every tag; leave the slow ones out locally with --tags-filter='!slow'.
    tags: [
      {
        name: 'slow',
        description: 'builds the production artifact and installs it with npm (a minute or more)',
        timeout: 600_000,
      },
    ],
    // expect.poll waits for something a user would see change; 1 s (the default) is too short
    // on two busy cores (a portal status poll flaked in CI while the other file ran an OTA load).
    expect: { poll: { timeout: 10_000 } },
  },
});
