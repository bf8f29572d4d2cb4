import { fromMinor } from '#core/accounts/money';
import { DomainError } from '#core/shared/errors';
import type { GraphQLContext } from '../context';
import type { Money, PageInfo } from '../generated/resolvers-types';

/** Money in minor units to the GraphQL `Money` type. */
export const money = (minor: number | string | null | undefined, currency: string): Money => ({
  amount: fromMinor(Number(minor ?? 0)),
  currency,
});

/** Relay connection from a page of items and the cursor of the next page; `extra` holds its other fields (totalCount). */
export function connection<T, Extra extends object>(
  items: T[],
  cursorOf: (item: T, index: number) => string,
  nextCursor: string | null,
  extra: Extra,
): Extra & { edges: { node: T; cursor: string }[]; pageInfo: PageInfo } {
  const last = items.length - 1;
  return {
    ...extra,
    edges: items.map((node, i) => ({ node, cursor: cursorOf(node, i) })),
    pageInfo: {
      hasNextPage: nextCursor !== null,
      endCursor: nextCursor ?? (last >= 0 ? cursorOf(items[last]!, last) : null),
    },
  };
}

/**
 * The value of an argument the schema gives a default. graphql-js applies a default only when the
 * argument is left out: a caller may still send an explicit null, which the generated types (that
 * assume the default applied) do not show. Such a null falls back to the same default.
 */
export const orDefault = <T>(value: T | null | undefined, fallback: T): T => value ?? fallback;

/**
 * A domain value held as a plain string where the schema declares an enum, checked against the
 * domain's own list. graphql-js refuses an unknown enum value when it serializes anyway; this
 * names the list it is missing from.
 */
export function oneOf<T extends string>(values: readonly T[], value: string, what: string): T {
  const found = values.find((v) => v === value);
  if (found === undefined) throw new Error(`${what} ${JSON.stringify(value)} is not one of: ${values.join(', ')}`);
  return found;
}

/**
 * A subscription field whose source yields the field's value itself, not `{ [field]: value }`: the
 * live views push one payload object to every subscriber of an account, and results are shared
 * per payload (live/shared-execution.ts). `present` turns each item into the field's value; tying
 * it to `subscribe` types what the generated signature leaves as `any` (the source's items).
 */
export function liveField<Item, Args, Result>(
  subscribe: (parent: unknown, args: Args, ctx: GraphQLContext) => AsyncIterable<Item> | Promise<AsyncIterable<Item>>,
  present: (item: Item) => Result,
): {
  subscribe: (parent: unknown, args: Args, ctx: GraphQLContext) => AsyncIterable<Item> | Promise<AsyncIterable<Item>>;
  resolve: (item: Item) => Result;
} {
  return { subscribe, resolve: present };
}

/** An input object with its explicit nulls read as "not given". */
export type NullsAsAbsent<T> = { [K in keyof T]: Exclude<T[K], null> };

/**
 * GraphQL lets a client send null for an optional input field; the services take a field that is
 * not given as absent (their zod schemas say `.optional()`). Top-level fields only.
 */
export function withoutNulls<T extends object>(input: T): NullsAsAbsent<T> {
  // Object.entries/fromEntries lose the key-to-type pairing; the filter is what makes the type true.
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== null)) as NullsAsAbsent<T>;
}

/** Lookups answer null for ids that are not the caller's, exactly like unknown ones. */
export async function orNull<T>(work: Promise<T>): Promise<T | null> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof DomainError && error.code === 'not_found') return null;
    throw error;
  }
}
