import fc from 'fast-check';

/** Bytes as a latin1 string (one char per byte): how raw requests are built and shown. */
export const bytesText = (maxLength: number): fc.Arbitrary<string> =>
  fc.uint8Array({ maxLength }).map((b) => Buffer.from(b).toString('latin1'));

/** UTF-8 text encoded into a latin1 string, so that it goes on the wire as UTF-8 bytes. */
export const asWire = (text: string): string => Buffer.from(text, 'utf8').toString('latin1');

/** Strings that broke parsers before: encodings, prototype keys, separators, huge and empty. */
export const NASTY = [
  '',
  ' ',
  '\u0000',
  '\t',
  '\r\n',
  '%',
  '%%',
  '%zz',
  '%E0%A4%A',
  '%C0%AF',
  '%00',
  '%2e%2e',
  '%ff',
  '[',
  ']',
  '//[',
  '[::1',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '{}',
  '[]',
  'null',
  'undefined',
  'true',
  '"',
  "'",
  '\\',
  '\u2028',
  '\uD800',
  '\uFFFF',
  '😀',
  'é',
  '${7*7}',
  '{{7*7}}',
  '../../etc/passwd',
  '<script>alert(1)</script>',
  "' OR 1=1 --",
  'NaN',
  'Infinity',
  '-0',
  '1e309',
  '0x10',
  '-1',
  '9007199254740993',
  ';',
  ',',
  '=',
  '#',
  '?',
  '+',
  '*',
  '/',
  '$',
];

/** A short hostile string: a known-nasty one, random text, or random bytes. */
export const nastyString = (maxLength = 40): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: fc.constantFrom(...NASTY), weight: 4 },
    { arbitrary: fc.string({ maxLength }), weight: 2 },
    { arbitrary: fc.string({ unit: 'grapheme', maxLength }), weight: 1 },
    { arbitrary: fc.string({ unit: 'binary', maxLength }), weight: 1 },
    { arbitrary: fc.integer({ min: 100, max: 20_000 }).map((n) => 'a'.repeat(n)), weight: 1 },
  );

/** `s` with `count` of `pieces` inserted at random places. */
export const insertInto = (base: fc.Arbitrary<string>, pieces: fc.Arbitrary<string>, max = 3): fc.Arbitrary<string> =>
  fc.tuple(base, fc.array(fc.tuple(fc.nat(), pieces), { maxLength: max })).map(([s, inserts]) =>
    inserts.reduce((acc, [at, piece]) => {
      const i = acc.length === 0 ? 0 : at % (acc.length + 1);
      return acc.slice(0, i) + piece + acc.slice(i);
    }, s),
  );

/** JSON-ish values with hostile keys (prototype names) and hostile leaves, nested a little. */
export const hostileJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 2 ** 31, 2 ** 53 + 2, -(2 ** 63), 1e308), weight: 2 },
    { arbitrary: nastyString(), weight: 3 },
    { arbitrary: fc.array(tie('value'), { maxLength: 4 }), weight: 1 },
    { arbitrary: tie('object'), weight: 2 },
  ),
  object: fc.dictionary(fc.oneof(fc.constantFrom(...NASTY.slice(0, 30)), fc.string({ maxLength: 8 })), tie('value'), {
    maxKeys: 5,
  }),
})).value;

/** An object whose own keys include prototype names, e.g. `{"__proto__": ..., "constructor": ...}` (as JSON text). */
export const protoKeyed = (values: fc.Arbitrary<unknown>): fc.Arbitrary<string> =>
  fc
    .array(
      fc.tuple(fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'x'), values),
      {
        maxLength: 4,
      },
    )
    .map((pairs) => `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`);

/** `arb` with probability `p` (0..1), null otherwise; shrinks towards null. */
export const sometimes = <T>(arb: fc.Arbitrary<T>, p: number): fc.Arbitrary<T | null> =>
  fc.oneof(
    { withCrossShrink: true },
    { arbitrary: fc.constant(null), weight: Math.round((1 - p) * 100) },
    { arbitrary: arb, weight: Math.round(p * 100) },
  );
