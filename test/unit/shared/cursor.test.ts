import { describe, it, expect } from 'vitest';
import { defineCursor, invalidCursor, jsonCursor, stringKeysCursor } from '#core/shared/cursor';
import { DomainError } from '#core/shared/errors';
import { historyCursor } from '#core/devices/device-history';

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

/** The refusal every list gave before the codec was shared (REST 422 with a `cursor` field error). */
const TODAY = {
  code: 'validation_failed',
  message: 'The cursor is not one this list returned.',
  errors: [{ field: 'cursor', message: 'is invalid' }],
};

function refusal(run: () => unknown): { code: string; message: string; errors: unknown } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(DomainError);
    const e = error as DomainError;
    return { code: e.code, message: e.message, errors: e.errors };
  }
  throw new Error('the cursor was accepted');
}

describe('cursor codec', () => {
  const codec = defineCursor<number>({
    write: (n) => `n:${n}`,
    read: (text) => (/^n:\d+$/.test(text) ? Number(text.slice(2)) : null),
  });

  it('encodes base64url of the written text, which carries no padding or URL-unsafe characters', () => {
    expect(codec.encode(42)).toBe(b64('n:42'));
    expect(codec.encode(123456789)).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it.each([0, 1, 99, 2 ** 40])('round-trips %s', (n) => {
    expect(codec.decode(codec.encode(n))).toBe(n);
  });

  it.each([
    ['empty', ''],
    ['not base64url text', '!!!'],
    ['another prefix', b64('x:42')],
    ['trailing garbage', b64('n:42x')],
  ])('refuses a %s cursor with the error every list gave', (_, cursor) => {
    expect(refusal(() => codec.decode(cursor))).toEqual(TODAY);
  });

  it('lets a list keep its own refusal', () => {
    const own = jsonCursor<number>({
      read: (v) => (typeof v === 'number' ? v : null),
      invalid: () => new DomainError('validation_failed', 'mine', { errors: [{ field: 'after', message: 'no' }] }),
    });
    expect(own.decode(own.encode(7))).toBe(7);
    expect(refusal(() => own.decode(b64('{')))).toEqual({
      code: 'validation_failed',
      message: 'mine',
      errors: [{ field: 'after', message: 'no' }],
    });
  });

  it('invalidCursor is the shared refusal', () => {
    const e = invalidCursor();
    expect({ code: e.code, message: e.message, errors: e.errors }).toEqual(TODAY);
  });
});

describe('string keys cursor (deployments, deployment devices)', () => {
  it.each([
    [['SN-1']],
    [['2026-01-01T00:00:00.000Z', '0b7c6a52-4f1e-4c43-9d9f-2a7f8e1f3b10']],
    [['with "quotes" and ,commas']],
  ])('round-trips %j', (keys) => {
    expect(stringKeysCursor.decode(stringKeysCursor.encode(keys), keys.length)).toEqual(keys);
  });

  it('writes the JSON array it always wrote', () => {
    expect(stringKeysCursor.encode(['SN-1'])).toBe(b64('["SN-1"]'));
  });

  it.each([
    ['another number of keys', b64('["a","b"]'), 1],
    ['a number key', b64('[1]'), 1],
    ['a key over 100 characters', b64(JSON.stringify(['x'.repeat(101)])), 1],
    ['an object', b64('{"0":"a"}'), 1],
    ['not JSON', b64('["a"'), 1],
    ['garbage', 'garbage', 1],
  ])('refuses %s', (_, cursor, count) => {
    expect(refusal(() => stringKeysCursor.decode(cursor, count))).toEqual(TODAY);
  });
});

describe('history cursor', () => {
  it('is h:<id>, as REST, GraphQL edges and the batched first pages always made it', () => {
    expect(historyCursor.encode(1234)).toBe(b64('h:1234'));
    expect(historyCursor.decode(b64('h:1234'))).toBe(1234);
  });

  it.each([b64('h:'), b64('h:-1'), b64('h:1.5'), b64('h:1234567890123456'), b64('s:SN-1'), b64(' h:1'), 'h:1'])(
    'refuses %j',
    (cursor) => {
      expect(refusal(() => historyCursor.decode(cursor))).toEqual(TODAY);
    },
  );
});
