/**
 * PostgreSQL text cannot hold NUL, so every surface refuses it at the edge, for every field:
 * REST (path, query, body) and GraphQL (literals and variables, over HTTP and graphql-ws).
 */

/** Path of the first string (or key) holding U+0000, or null. Iterative: bodies may nest deeply. */
export function findNul(value: unknown, root: string): string | null {
  const stack: Array<[unknown, string]> = [[value, root]];
  while (stack.length > 0) {
    const [current, path] = stack.pop()!;
    if (typeof current === 'string') {
      if (current.includes('\u0000')) return path;
    } else if (current && typeof current === 'object') {
      for (const [key, child] of Object.entries(current)) {
        const childPath = path ? `${path}.${key}` : key;
        if (key.includes('\u0000')) return childPath;
        stack.push([child, childPath]);
      }
    }
  }
  return null;
}
