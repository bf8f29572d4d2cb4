import type { Knex } from 'knex';
import type { Clock } from './shared/clock';
import type { Logger } from './logger';
import type { TransactionRunner } from './db/transaction';

/** What every domain service is built from: no hidden singletons, main.ts wires them. */
export interface ServiceDeps {
  knex: Knex;
  /**
   * Connections whose prepared statements keep one plan for every value (Database.plannedOnce,
   * core/db/database.ts); `knex` when not given.
   */
  plannedOnce?: Knex;
  transaction: TransactionRunner;
  clock: Clock;
  logger: Logger;
}
