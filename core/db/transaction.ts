import type { Knex } from 'knex';

/**
 * One unit of work: the callback's writes commit together, and only after the commit is
 * `afterCommit` called with the transaction (the outbox dispatcher is woken when it appended
 * events), so subscribers never see an event whose change rolled back.
 * Pass the transaction to every service call inside it (PGlite has one connection: a query
 * on the outer knex inside a transaction would wait forever).
 */
export interface TransactionRunner {
  <T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T>;
}

export function createTransactionRunner(knex: Knex, afterCommit: (trx: Knex.Transaction) => void): TransactionRunner {
  return async <T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> => {
    let unit: Knex.Transaction | undefined;
    const result = await knex.transaction((trx) => {
      unit = trx;
      return work(trx);
    });
    if (unit) afterCommit(unit);
    return result;
  };
}
