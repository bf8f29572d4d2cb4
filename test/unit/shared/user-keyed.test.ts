import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ownValue, userKeyedRecord } from '#core/shared/user-keyed';
import { ClaimDevicesInput } from '#core/devices/claim.service';

/** What a client sends, parsed as the server parses it: `__proto__` is then an own key. */
const fromJson = (text: string) => JSON.parse(text) as Record<string, string>;

describe('ownValue: a user-keyed map answers only with its own entries', () => {
  const map = fromJson('{"__proto__": "Lobby", "SN-1": "Hall 3"}');
  type Row = [string, Record<string, string> | null | undefined, string, string | undefined];
  it.each<Row>([
    ['an own key', map, 'SN-1', 'Hall 3'],
    ['own `__proto__`', map, '__proto__', 'Lobby'],
    ['`__proto__` the map lacks', { a: 'b' }, '__proto__', undefined],
    ...['constructor', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', '__defineGetter__'].map((key): Row => [
      `inherited \`${key}\``,
      map,
      key,
      undefined,
    ]),
    ['a null-prototype map', Object.assign(Object.create(null) as Record<string, string>, { k: 'v' }), 'k', 'v'],
    ['no map', undefined, 'constructor', undefined],
    ['null', null, 'toString', undefined],
  ])('%s', (_, m, key, expected) => {
    expect(ownValue(m, key)).toBe(expected);
  });
});

describe('userKeyedRecord: parses every key, `__proto__` included, as data', () => {
  const Names = userKeyedRecord(z.string().trim().min(1).max(200));

  it('keeps `__proto__` as a key of a null-prototype object, and its JSON', () => {
    const parsed = Names.parse(fromJson('{"__proto__": " Lobby ", "constructor": "Hall 2"}'));
    expect(Object.getPrototypeOf(parsed)).toBeNull();
    expect(Object.entries(parsed)).toEqual([
      ['__proto__', 'Lobby'],
      ['constructor', 'Hall 2'],
    ]);
    expect('toString' in parsed).toBe(false);
    expect(JSON.stringify(parsed)).toBe('{"__proto__":"Lobby","constructor":"Hall 2"}');
    // zod's own record loses the key (the reason this schema exists).
    expect(Object.keys(z.record(z.string(), z.string()).parse(fromJson('{"__proto__": "Lobby"}')))).toEqual([]);
  });

  it('parses a null-prototype object too (GraphQL literals, a second parse)', () => {
    const once = Names.parse(fromJson('{"__proto__": "Lobby"}'));
    expect(Object.entries(Names.parse(once))).toEqual([['__proto__', 'Lobby']]);
  });

  it.each([
    ['a bad value, by key', '{"__proto__": "", "ok": "x"}', [{ path: ['__proto__'], code: 'too_small' }]],
    ['a string', '"Lobby"', [{ path: [], code: 'invalid_type' }]],
    ['an array', '["Lobby"]', [{ path: [], code: 'invalid_type' }]],
    ['null', 'null', [{ path: [], code: 'invalid_type' }]],
  ])('refuses %s as zod.record would', (_, json, issues) => {
    const result = Names.safeParse(JSON.parse(json));
    expect(result.success).toBe(false);
    expect(result.error!.issues).toMatchObject(issues);
  });

  it('is documented (OpenAPI) as the record it parses', () => {
    const record = z.record(z.string(), z.string().min(1).max(200));
    for (const io of ['input', 'output'] as const) {
      expect(z.toJSONSchema(userKeyedRecord(z.string().min(1).max(200)), { io, unrepresentable: 'any' })).toEqual(
        z.toJSONSchema(record, { io }),
      );
    }
  });
});

describe('claim input: `names` and `csrs` are keyed by serial, any serial', () => {
  it('keeps `__proto__` in `names`, and refuses it when it is not a claimed serial', () => {
    const names = fromJson('{"__proto__": "Lobby"}');
    const ok = ClaimDevicesInput.parse({ serials: ['__proto__', 'constructor'], model: 'LX-200', names });
    expect(Object.entries(ok.names!)).toEqual([['__proto__', 'Lobby']]);
    const refused = ClaimDevicesInput.safeParse({ serials: ['SN-1'], model: 'LX-200', names });
    expect(refused.error?.issues).toMatchObject([
      { path: ['names', '__proto__'], message: 'is not one of the claimed serials' },
    ]);
  });
});
