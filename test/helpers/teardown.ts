/**
 * A resource as teardown sees it. Tests declare `let server: TestServer` and assign it in a
 * beforeAll hook (or in the test) so that they use it without checks; but vitest runs afterAll
 * hooks even when beforeAll failed part way, and the variable is then still undefined.
 * `await ifStarted(server)?.close()` releases what did start and leaves a failed start to report
 * its own error, not a TypeError from the teardown that would also skip the steps after it.
 */
export function ifStarted<T>(resource: T): T | undefined {
  return resource;
}
