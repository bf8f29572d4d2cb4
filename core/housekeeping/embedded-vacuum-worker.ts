import type { Knex } from 'knex';
import type { Logger } from '../logger';
import { SingleFlightLoop } from '../shared/single-flight-loop';
import { maintainTable, selectTablesDue, type TableDue } from './store/table-maintenance.store';

export interface EmbeddedVacuumWorkerOptions {
  knex: Knex;
  logger: Logger;
  /** Between passes (ms): autovacuum's own naptime. Default one minute. */
  intervalMs?: number;
  /** Before the first pass (ms). Default one minute: not in the way of a start or a reconnect storm. */
  firstDelayMs?: number;
  /** What each pass did (tests, metrics). */
  onPass?: (pass: { tables: TableDue[]; ms: number }) => void;
}

/** A pass that held the database longer than this is logged as a warning. */
const SLOW_PASS_MS = 5_000;

/**
 * Autovacuum for the embedded database. PGlite is PostgreSQL in one process with no background
 * workers, so nothing ever vacuums or analyzes it: rows deleted or updated stay in the tables
 * and indexes (the outbox queue `events_pending` kept 100,000 dead rows and no live one after
 * 100,000 events), the planner never gets statistics (it estimated 275 of an account's 100,000
 * devices and chose a bitmap scan), and after about two billion transactions PostgreSQL would
 * stop accepting writes to protect itself from transaction id wraparound. This worker does what
 * autovacuum does on PostgreSQL, with its thresholds (selectTablesDue): every minute, each table
 * due gets VACUUM, ANALYZE or both, one table at a time.
 *
 * The embedded database runs one statement at a time, so a table's VACUUM holds the others back
 * while it runs (about a second for 100,000 devices with all rows dead, tens of milliseconds
 * for a pass that follows the last one by a minute); the event loop is not held (the database
 * has its own thread). On PostgreSQL autovacuum does this, and this worker is not started.
 */
export class EmbeddedVacuumWorker {
  private readonly loop: SingleFlightLoop;

  constructor(private readonly options: EmbeddedVacuumWorkerOptions) {
    this.loop = new SingleFlightLoop({
      round: () => this.pass(),
      onError: (err) => options.logger.warn({ err }, 'embedded database maintenance failed; will retry'),
      poll: { everyMs: options.intervalMs ?? 60_000, firstAfterMs: options.firstDelayMs ?? 60_000 },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** One pass now (tests); a pass already under way is awaited instead. */
  runNow(): Promise<void> {
    return this.loop.run();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async pass(): Promise<void> {
    const started = performance.now();
    const tables = await selectTablesDue(this.options.knex);
    for (const table of tables) {
      // A stop waits for the pass: only the table under way, not the whole list.
      if (this.loop.stopping) break;
      await maintainTable(this.options.knex, table);
    }
    const ms = Math.round(performance.now() - started);
    this.options.onPass?.({ tables, ms });
    if (tables.length === 0) return;
    const summary = {
      vacuumed: tables.filter((t) => t.vacuum).map((t) => t.name),
      analyzed: tables.filter((t) => t.analyze).map((t) => t.name),
      ms,
    };
    if (ms > SLOW_PASS_MS) this.options.logger.warn(summary, 'embedded database maintenance held the database');
    else this.options.logger.debug(summary, 'embedded database maintained');
  }
}
