import type { Knex } from 'knex';
import { IDEMPOTENCY_LOCK_SPACE } from '../../db/advisory-lock';
import type { Db } from '../../db/db';

/** An Idempotency-Key is scoped per account. */
export interface KeyScope {
  accountId: string;
  key: string;
}

/** What was stored for a key: who sent which request, and what it was answered. */
export interface StoredKey {
  principal: string | null;
  requestHash: string;
  /** `done`, or `in_progress` from a process of the previous version still running it. */
  state: string;
  responseStatus: number;
  responseBody: unknown;
}

interface KeyRow {
  principal: string | null;
  request_hash: string;
  state: string;
  response_status: number;
  response_body: unknown;
}

const toStoredKey = (row: KeyRow): StoredKey => ({
  principal: row.principal,
  requestHash: row.request_hash,
  state: row.state,
  responseStatus: row.response_status,
  responseBody: row.response_body,
});

const scopeOf = (scope: KeyScope) => ({ account_id: scope.accountId, key: scope.key });

/** The key's row if it was stored since `createdSince` (older ones are expired). */
export async function findKeySince(db: Db, input: KeyScope & { createdSince: Date }): Promise<StoredKey | null> {
  const row = (await db('idempotency_keys')
    .where(scopeOf(input))
    .where('created_at', '>=', input.createdSince)
    .first()) as KeyRow | undefined;
  return row ? toStoredKey(row) : null;
}

export async function findKey(db: Db, scope: KeyScope): Promise<StoredKey | null> {
  const row = (await db('idempotency_keys').where(scopeOf(scope)).first()) as KeyRow | undefined;
  return row ? toStoredKey(row) : null;
}

/**
 * Holds the key for the rest of the transaction (a transaction-level advisory lock: it goes
 * with the transaction, also when its process dies). False when another transaction holds it.
 */
export async function tryHoldKey(trx: Knex.Transaction, scope: KeyScope): Promise<boolean> {
  const held = await trx.raw<{
    rows: Array<{ locked: boolean }>;
  }>('SELECT pg_try_advisory_xact_lock(?, hashtext(?)) AS locked', [
    IDEMPOTENCY_LOCK_SPACE,
    `${scope.accountId}\n${scope.key}`,
  ]);
  return held.rows[0]?.locked === true;
}

/** Deletes the key's row when it expired, or is an `in_progress` marker older than `markerBefore` (left by a crash). */
export async function deleteStaleKey(
  db: Db,
  input: KeyScope & { expiredBefore: Date; markerBefore: Date },
): Promise<void> {
  await db('idempotency_keys')
    .where(scopeOf(input))
    // `void`: a builder is thenable, and knex does not await what a grouping callback returns.
    .where(
      (q) =>
        void q
          .where('created_at', '<', input.expiredBefore)
          .orWhere((legacy) => void legacy.where('state', 'in_progress').where('created_at', '<', input.markerBefore)),
    )
    .delete();
}

/** Stores the answer of a finished request. `responseJson`: the body as stored (sealed or not), JSON text. */
export async function insertDoneKey(
  db: Db,
  input: KeyScope & {
    principal: string;
    operation: string;
    requestHash: string;
    responseStatus: number;
    responseJson: string;
    createdAt: Date;
  },
): Promise<void> {
  await db('idempotency_keys').insert({
    ...scopeOf(input),
    principal: input.principal,
    operation: input.operation,
    request_hash: input.requestHash,
    state: 'done',
    response_status: input.responseStatus,
    response_body: input.responseJson,
    created_at: input.createdAt,
  });
}
