import { fromMinor } from '../../domain/accounts/money';

/** Money in minor units to the GraphQL `Money` type. */
export const money = (minor: number | string | null | undefined, currency: string) => ({
  amount: fromMinor(Number(minor ?? 0)),
  currency,
});

export const iso = (value: Date | string | null | undefined): string | null =>
  value == null ? null : new Date(value).toISOString();

/** Relay connection from a page of items and the cursor of the next page. */
export function connection<T>(
  items: T[],
  cursorOf: (item: T, index: number) => string,
  nextCursor: string | null,
  extra: Record<string, unknown> = {},
) {
  return {
    ...extra,
    edges: items.map((node, i) => ({ node, cursor: cursorOf(node, i) })),
    pageInfo: {
      hasNextPage: nextCursor !== null,
      endCursor: nextCursor ?? (items.length ? cursorOf(items[items.length - 1]!, items.length - 1) : null),
    },
  };
}
