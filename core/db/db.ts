import type { Knex } from 'knex';

/**
 * What a store function runs its statements on: the connection, or the transaction of the unit
 * of work that called it (a transaction passed as `db` makes several stores one unit of work).
 */
export type Db = Knex | Knex.Transaction;
