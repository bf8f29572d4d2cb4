import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { arrayLiteral, sparseArrayLiteral } from '#core/db/array-literal';

/** The array literal of a batched write says what node-postgres would send for the same array. */
/** node-postgres's own formatting of a parameter (pg.utils is not in its type declarations). */
const pgUtils = (pg as unknown as { utils: { prepareValue(value: unknown): unknown } }).utils;

describe('array literals of batched writes', () => {
  it('quotes and escapes text as node-postgres does, with NULL for null', () => {
    const values = [
      '1.4.2',
      '',
      'NULL',
      'a,b',
      '{x}',
      'say "hi"',
      'back\\slash',
      '{"k":"v\\"w"}',
      'é€😀',
      null,
      undefined,
    ];
    expect(arrayLiteral(values)).toBe(pgUtils.prepareValue(values));
  });

  it('writes numbers as node-postgres does', () => {
    const values = [0, -61, 3600, 2_147_483_647, 1.5, null];
    expect(arrayLiteral(values)).toBe(pgUtils.prepareValue(values));
  });

  it('writes booleans and large numbers (luminaire counters) as node-postgres does', () => {
    const values = [true, false, 281_474_976_710_655, null];
    expect(arrayLiteral(values)).toBe(pgUtils.prepareValue(values));
  });

  it('writes a time as its UTC instant', () => {
    expect(arrayLiteral([new Date('2026-11-27T10:01:07.123Z'), null])).toBe('{"2026-11-27T10:01:07.123Z",NULL}');
  });

  it('sends a column no row sets as null, and any other column whole', () => {
    expect(sparseArrayLiteral([null, undefined, null])).toBeNull();
    expect(sparseArrayLiteral([null, 0, undefined])).toBe(arrayLiteral([null, 0, undefined]));
    expect(sparseArrayLiteral([null, ''])).toBe('{NULL,""}');
  });
});
