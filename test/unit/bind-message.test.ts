import { describe, expect, it } from 'vitest';
import { protocol } from '@electric-sql/pglite';
import { serializeBind } from '#core/db/bind-message';

/**
 * The embedded database's Bind message (core/db/bind-message.ts) is byte for byte the one
 * PGlite's own serializer makes: the same parameters reach the database.
 */
describe('the Bind message of the embedded database connection', () => {
  const bytes = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength).toString('hex');

  it.each([
    ['no parameters', {}],
    ['a named portal and statement', { portal: 'p1', statement: 's1', values: ['x'] }],
    ['text, nulls and non-ASCII text', { values: ['abc', null, 'é€😀', '', '{"a":"b\\\\"}'] }],
    ['a binary parameter', { values: [new Uint8Array([1, 2, 3]), 'x', new Uint8Array([9]).buffer] }],
    ['a long array literal', { values: [`{${Array.from({ length: 500 }, (_, i) => `"${i}"`).join(',')}}`] }],
  ])('%s', (_label, config) => {
    expect(bytes(serializeBind(config))).toBe(bytes(protocol.serialize.bind(config)));
  });

  it("maps values with node-postgres's value mapper first", () => {
    const values: unknown[] = [1, undefined, 'x'];
    const valueMapper = (v: unknown) => (v === undefined ? null : JSON.stringify(v));
    expect(bytes(serializeBind({ values, valueMapper }))).toBe(
      bytes(protocol.serialize.bind({ values: values as string[], valueMapper })),
    );
  });
});
