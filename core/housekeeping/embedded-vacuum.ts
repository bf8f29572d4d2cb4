import type { Knex } from 'knex';
import type { Logger } from '../logger';
import { maintainTable, selectTablesDue, type TableDue } from './store/table-maintenance.store';

/** Autovacuum's naptime: how often the embedded database is checked (ms). */
export const EMBEDDED_VACUUM_INTERVAL_MS = 60_000;

/** A pass that held the database longer than this is logged as a warning. */
const SLOW_PASS_MS = 5_000;

/**
 * One pass of autovacuum for the embedded database; the service runs it every minute
 * (api/src/background-workers.ts). PGlite is PostgreSQL in one process with no background
 * workers, so nothing else ever vacuums or analyzes it: rows deleted or updated stay in the
 * tables and indexes (the outbox queue `events_pending` kept 100,000 dead rows and no live one
 * after 100,000 events), the planner never gets statistics (it estimated 275 of an account's
 * 100,000 devices and chose a bitmap scan), and the age of every table towards transaction id
 * wraparound only grew. Each table due by autovacuum's own thresholds (selectTablesDue) gets
 * VACUUM, ANALYZE or both, one table at a time; `stopping` ends the pass between two tables. A
 * table that cannot be maintained (dropped since the list was read: a luminaire partition past
 * its retention) does not stop the pass. Resolves with the tables that were due; the log says
 * which of them were maintained.
 *
 * What this cannot do: the embedded database's one connection reaches only its own database, not
 * the template databases, whose age still counts towards PostgreSQL's wraparound stop (about two
 * billion write transactions; a year at 60 a second). docs/production.md says so.
 *
 * The embedded database runs one statement at a time, so a table's VACUUM holds the others back
 * while it runs (about a second for 100,000 devices with all rows dead, tens of milliseconds for
 * a pass that follows the last one by a minute); statements waiting get their turn between two
 * tables, and the event loop is not held (the database has its own thread). On PostgreSQL,
 * autovacuum does this and the pass is never run.
 */
export async function vacuumEmbeddedDatabase(input: {
  knex: Knex;
  logger: Logger;
  stopping: () => boolean;
}): Promise<TableDue[]> {
  const { knex, logger } = input;
  const started = performance.now();
  const tables = await selectTablesDue(knex);
  const maintained: TableDue[] = [];
  for (const table of tables) {
    if (input.stopping()) break;
    try {
      await maintainTable(knex, table);
      maintained.push(table);
    } catch (err) {
      // 42P01: gone since the list was read.
      if ((err as { code?: string }).code !== '42P01')
        logger.warn({ err, table: table.name }, 'embedded database maintenance of a table failed; will retry');
    }
  }
  if (tables.length === 0) return tables;
  const ms = Math.round(performance.now() - started);
  const summary = {
    // What was done: a pass cut short by a stop, or a table that failed, is not counted.
    vacuumed: maintained.filter((t) => t.vacuum).map((t) => t.name),
    analyzed: maintained.filter((t) => t.analyze).map((t) => t.name),
    ms,
  };
  if (ms > SLOW_PASS_MS) logger.warn(summary, 'embedded database maintenance held the database');
  else logger.debug(summary, 'embedded database maintained');
  return tables;
}
