import type { Knex } from 'knex';
import type { DatabaseKind } from './database';

/** Keys of the session advisory locks the service takes (one per kind of cluster-wide chore). */
export const ADVISORY_LOCKS = {
  /** The retention pass: one process of a cluster at a time walks history and the outbox. */
  retention: 0x666c_0001,
  /** The fixture health pass (health states, the rollout gate's fixture signals, warranty expiry). */
  fixtureHealth: 0x666c_0003,
} as const;

/**
 * First half of the two-number transaction locks an idempotent request holds while it runs
 * (the second is a hash of account and key). PostgreSQL keeps two-number and one-number
 * advisory keys apart, so these never meet the locks above.
 */
export const IDEMPOTENCY_LOCK_SPACE = 0x666c_0002;

/** What `query` of a pooled node-postgres connection answers. */
interface PooledConnection {
  query(sql: string, values: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

/** The pool side of Knex's client, which Knex types as `any`. */
interface ConnectionPool {
  acquireConnection(): Promise<PooledConnection>;
  releaseConnection(connection: PooledConnection): Promise<unknown>;
}

/**
 * Runs `work` only if no other process of the cluster holds the lock, and answers whether it
 * ran. A session lock on a connection set aside from the pool for the duration: a transaction
 * lock would make the whole chore one long transaction. The work itself uses the pool as usual.
 * If the process dies, PostgreSQL drops the lock with its connection. The embedded database
 * belongs to one process (its data folder is locked), so there is nobody to exclude.
 */
export async function withAdvisoryLock(
  knex: Knex,
  kind: DatabaseKind,
  key: number,
  work: () => Promise<void>,
): Promise<boolean> {
  if (kind === 'embedded') {
    await work();
    return true;
  }
  // Knex types its client as `any`; ours pools node-postgres clients.
  const pool = knex.client as ConnectionPool;
  const connection = await pool.acquireConnection();
  try {
    const got = await connection.query('SELECT pg_try_advisory_lock($1) AS locked', [key]);
    if (got.rows[0]?.locked !== true) return false;
    try {
      await work();
    } finally {
      await connection.query('SELECT pg_advisory_unlock($1)', [key]);
    }
    return true;
  } finally {
    await pool.releaseConnection(connection);
  }
}
