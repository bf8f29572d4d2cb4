import { z } from 'zod';

/**
 * Maps whose keys the client chooses (a claim's `names` and `csrs` by serial, device tags):
 * any string is a key, `constructor`, `toString` and `__proto__` included (all valid serials).
 * On a plain object `map[key]` finds what Object.prototype has under such a name (a function,
 * or the prototype itself for `__proto__`), and assigning `map['__proto__']` changes the
 * prototype instead of adding a key. Read such maps with `ownValue`; parse them with
 * `userKeyedRecord`, which keeps every key as data.
 */

/** The map's own value under `key`; undefined when it has none, whatever Object.prototype has. */
export function ownValue<V>(map: Readonly<Record<string, V>> | null | undefined, key: string): V | undefined {
  return map != null && Object.hasOwn(map, key) ? map[key] : undefined;
}

const isRecordLike = (value: unknown): value is Record<string, unknown> => {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
};

/**
 * `z.record(z.string(), value)` that keeps every key. zod's record leaves `__proto__` out of
 * its output (JSON.parse makes it an own key, so a client can send it, and it is then silently
 * lost); this one parses into a null-prototype object, where `__proto__` is a key like any other
 * and a lookup never reaches Object.prototype. Value errors are reported under `[key]` as zod's
 * record reports them, and the JSON Schema (OpenAPI) is the record's.
 */
export function userKeyedRecord<V extends z.ZodType>(
  value: V,
): z.ZodType<Record<string, z.output<V>>, Record<string, z.input<V>>> {
  const documented = z.toJSONSchema(z.record(z.string(), value), { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  // Named value schemas would need their $defs carried along; none needs that yet.
  if (documented.$defs) throw new Error('userKeyedRecord: a value schema with an id (.meta({ id })) is not supported');
  delete documented.$schema;
  const schema = z
    // Entries through a Map: zod's map keeps every key, `__proto__` included.
    .preprocess(
      (raw, ctx) => {
        if (!isRecordLike(raw)) {
          ctx.addIssue({ code: 'invalid_type', expected: 'record', input: raw });
          return raw;
        }
        return new Map(Object.entries(raw));
      },
      z.map(z.string(), value),
    )
    .transform((entries) => {
      const record = Object.create(null) as Record<string, z.output<V>>;
      for (const [key, parsed] of entries) record[key] = parsed;
      return record;
    })
    .meta(documented);
  // The input type the record documents (the preprocess step itself takes `unknown`).
  return schema as unknown as z.ZodType<Record<string, z.output<V>>, Record<string, z.input<V>>>;
}
