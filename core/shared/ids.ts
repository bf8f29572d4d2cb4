import { randomUUID } from 'node:crypto';

export const newId = (): string => randomUUID();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Ids from outside are checked before they reach SQL: a malformed id is simply "not found". */
export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);
