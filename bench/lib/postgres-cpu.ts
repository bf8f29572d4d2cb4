import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { processCpuMicros } from './proc-cpu';

/**
 * CPU time (µs) of every `postgres` process on this machine so far, from /proc: the server's
 * backends, checkpointer and WAL writer together. Diff two readings for what a phase cost the
 * database; undefined where /proc is missing. Resolution 10 ms per process, fine over seconds.
 * Counts other databases' work too: prefer `PostgresBackendCpu` where the database is known.
 */
export function postgresCpuMicros(): number | undefined {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return undefined;
  }
  let micros = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'postgres') continue;
      micros += processCpuMicros(Number(pid)) ?? 0;
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return micros;
}

/**
 * CPU time of the PostgreSQL backends serving one database (the service's connections, from
 * pg_stat_activity), from /proc: other work on the same PostgreSQL (another suite, another
 * benchmark's database) is not counted. Backends come and go with the pool, so the set is
 * sampled every 100 ms while measuring; a backend that ends between two samples loses at most
 * its last 100 ms, and one that starts is counted from zero.
 *
 *   const meter = await PostgresBackendCpu.open({ adminUrl, database });
 *   meter.start(); ...work...; const micros = await meter.stop();
 */
export class PostgresBackendCpu {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();
  private transactionsAtStart = 0;
  /** Transactions the database committed during the last measurement (a statement outside a transaction is one). */
  transactions = 0;

  private constructor(
    private readonly client: pg.Client,
    private readonly database: string,
  ) {}

  static async open(input: { adminUrl: string; database: string }): Promise<PostgresBackendCpu> {
    const client = new pg.Client({ connectionString: input.adminUrl });
    await client.connect();
    return new PostgresBackendCpu(client, input.database);
  }

  private async sample(initial: boolean): Promise<void> {
    const { rows } = await this.client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [
      this.database,
    ]);
    for (const { pid } of rows) {
      const micros = processCpuMicros(pid);
      if (micros === undefined) continue;
      if (!this.first.has(pid)) this.first.set(pid, initial ? micros : 0);
      this.last.set(pid, micros);
    }
  }

  /** Starts a measurement (the backends' CPU so far is the zero). */
  private async committed(): Promise<number> {
    const { rows } = await this.client.query<{ n: string }>(
      'SELECT xact_commit AS n FROM pg_stat_database WHERE datname = $1',
      [this.database],
    );
    return Number(rows[0]?.n ?? 0);
  }

  async start(): Promise<void> {
    this.first.clear();
    this.last.clear();
    // The statistics collector publishes counts with a delay: start from a fresh snapshot.
    await this.client.query('SELECT pg_stat_clear_snapshot()');
    this.transactionsAtStart = await this.committed();
    await this.sample(true);
    this.timer = setInterval(() => {
      this.sampling = this.sampling.then(() => this.sample(false)).catch(() => undefined);
    }, 100);
  }

  /** Ends the measurement: CPU µs the database's backends used since start(). */
  async stop(): Promise<number> {
    clearInterval(this.timer);
    await this.sampling;
    await this.sample(false);
    await this.client.query('SELECT pg_stat_clear_snapshot()');
    this.transactions = (await this.committed()) - this.transactionsAtStart;
    let micros = 0;
    for (const [pid, last] of this.last) micros += last - (this.first.get(pid) ?? 0);
    return micros;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.sampling;
    await this.client.end();
  }
}
