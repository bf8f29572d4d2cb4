/**
 * The schema's JSON scalar is any JSON value, so the generated types say `unknown`. These read
 * the shapes the API documents for its JSON fields (event and history data are objects, tags map
 * strings to strings), and fall back to empty rather than trust a shape that is not there.
 */

export type JsonObject = Record<string, unknown>;

export function jsonObject(value: unknown): JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  // A non-array object parsed from JSON: every key maps to some JSON value.
  return value as JsonObject;
}

/** String-to-string labels (tags); entries of any other type are left out. */
export function stringMap(value: unknown): Record<string, string> {
  return Object.fromEntries(
    Object.entries(jsonObject(value)).flatMap(([key, v]) => (typeof v === 'string' ? [[key, v]] : [])),
  );
}
