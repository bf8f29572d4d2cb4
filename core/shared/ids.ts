import { randomUUID } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

export const newId = (): string => randomUUID();

/**
 * An RFC 9562 version 7 UUID: milliseconds since 1970 first, then a counter and random bits, so
 * ids made later sort after earlier ones. For rows appended to a log that keeps a history (the
 * outbox's events, webhook deliveries): their unique index then grows at its right end. Measured
 * with 2,000,000 events kept, inserting 50,000 more in statements of 1,000: 7.0-7.8 µs of
 * PostgreSQL and 375 bytes of WAL per event, against 12.4-13.2 µs and 1,519-1,577 bytes with
 * random (version 4) ids, whose inserts land on leaf pages all over the index.
 */
export const newTimeOrderedId = (): string => uuidv7();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Ids from outside are checked before they reach SQL: a malformed id is simply "not found". */
export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);
