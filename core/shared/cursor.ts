import { DomainError } from './errors';

/**
 * The one codec of list cursors. To a client a cursor is opaque: base64url of a short text that
 * holds the keys of the last row it saw. Each list says how its keys are written as text and
 * read back; reading refuses any text that writing could not have produced, so a tampered,
 * truncated or foreign cursor is answered with `validation_failed` and never reaches SQL.
 */
export interface CursorCodec<K> {
  encode(keys: K): string;
  /** The keys, or `validation_failed` when the cursor is not one this list returned. */
  decode(cursor: string): K;
}

export interface CursorFormat<K> {
  write(keys: K): string;
  /** The keys, or null when `text` is not something `write` produces. */
  read(text: string): K | null;
  /** The refusal of a bad cursor (default: {@link invalidCursor}). */
  invalid?: () => DomainError;
}

/** How every list refuses a cursor it did not return, unless it names its own refusal. */
export function invalidCursor(): DomainError {
  return new DomainError('validation_failed', 'The cursor is not one this list returned.', {
    errors: [{ field: 'cursor', message: 'is invalid' }],
  });
}

export function defineCursor<K>(format: CursorFormat<K>): CursorCodec<K> {
  const invalid = format.invalid ?? invalidCursor;
  return {
    encode: (keys) => Buffer.from(format.write(keys), 'utf8').toString('base64url'),
    decode: (cursor) => {
      const keys = format.read(Buffer.from(cursor, 'base64url').toString('utf8'));
      if (keys === null) throw invalid();
      return keys;
    },
  };
}

/**
 * Keys written as one JSON value. `read` gets the parsed value (unknown: it came from outside)
 * and returns the keys or null.
 */
export function jsonCursor<K>(format: {
  read: (value: unknown) => K | null;
  invalid?: () => DomainError;
}): CursorCodec<K> {
  return defineCursor<K>({
    write: (keys) => JSON.stringify(keys),
    read: (text) => {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        return null;
      }
      return format.read(value);
    },
    ...(format.invalid ? { invalid: format.invalid } : {}),
  });
}

/** At most this many characters per key of a {@link stringKeysCursor}. */
const MAX_STRING_KEY = 100;

/**
 * A cursor of `count` string keys (a JSON array): `encode(['2025-01-01T00:00:00.000Z', id])`,
 * `decode(cursor, 2)`. A cursor with another number of keys is refused.
 */
export const stringKeysCursor = {
  encode: (keys: string[]): string => stringKeys(keys.length).encode(keys),
  decode: (cursor: string, count: number): string[] => stringKeys(count).decode(cursor),
};

function stringKeys(count: number): CursorCodec<string[]> {
  return jsonCursor({
    read: (value) =>
      Array.isArray(value) &&
      value.length === count &&
      value.every((p): p is string => typeof p === 'string' && p.length <= MAX_STRING_KEY)
        ? value
        : null,
  });
}

/**
 * A keyset page from `rows` fetched with `limit + 1`: the page's rows, the cursor of each (a
 * GraphQL edge's cursor continues after that row, exactly like the page's next cursor) and the
 * next page's cursor, null on the last page.
 */
export function keysetPage<T>(
  rows: T[],
  limit: number,
  cursorOf: (row: T) => string,
): { items: T[]; cursors: string[]; nextCursor: string | null } {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  const cursors = items.map(cursorOf);
  return { items, cursors, nextCursor: more ? cursors[cursors.length - 1]! : null };
}
