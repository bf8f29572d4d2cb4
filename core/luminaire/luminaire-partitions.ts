import type { ServiceDeps } from '../service-deps';
import { createPartition, dropPartition, listPartitions } from './store/luminaire-partitions.store';

/**
 * The time partitions of the luminaire tables (docs/luminaire-data.md "Storage"): raw readings
 * by UTC day, hourly roll-ups by month, daily roll-ups by year. The housekeeping pass creates the
 * coming partitions ahead of time and drops those wholly past their retention; the ingest asks
 * for the partition of a reading's time before it writes, so a start after a long stop, or a
 * clock that moved, never meets a missing partition.
 */

type Unit = 'day' | 'month' | 'year';

interface PartitionedTable {
  parent: 'luminaire_points' | 'luminaire_hourly' | 'luminaire_daily';
  unit: Unit;
}

const TABLES: PartitionedTable[] = [
  { parent: 'luminaire_points', unit: 'day' },
  { parent: 'luminaire_hourly', unit: 'month' },
  { parent: 'luminaire_daily', unit: 'year' },
];

/** How long rows are kept, in days (LUMINAIRE_RAW_RETENTION_DAYS, LUMINAIRE_HOURLY_RETENTION_DAYS). */
export interface LuminaireRetention {
  rawDays: number;
  hourlyDays: number;
}

export const DEFAULT_LUMINAIRE_RETENTION: LuminaireRetention = { rawDays: 30, hourlyDays: 365 };

/** Days of raw partitions made ahead of today. */
const DAYS_AHEAD = 3;
const DAY_MS = 86_400_000;

export function startOf(unit: Unit, at: Date): Date {
  const y = at.getUTCFullYear();
  if (unit === 'year') return new Date(Date.UTC(y, 0, 1));
  if (unit === 'month') return new Date(Date.UTC(y, at.getUTCMonth(), 1));
  return new Date(Date.UTC(y, at.getUTCMonth(), at.getUTCDate()));
}

export function nextStart(unit: Unit, start: Date): Date {
  const y = start.getUTCFullYear();
  if (unit === 'year') return new Date(Date.UTC(y + 1, 0, 1));
  if (unit === 'month') return new Date(Date.UTC(y, start.getUTCMonth() + 1, 1));
  return new Date(start.getTime() + DAY_MS);
}

/** `luminaire_points_p20261127`, `luminaire_hourly_p202611`, `luminaire_daily_p2026`. */
export function partitionName(table: PartitionedTable, start: Date): string {
  const digits = start.toISOString().slice(0, 10).replaceAll('-', '');
  return `${table.parent}_p${digits.slice(0, table.unit === 'year' ? 4 : table.unit === 'month' ? 6 : 8)}`;
}

/** The start of the range a partition name stands for; null for a name this code did not make. */
export function partitionStart(table: PartitionedTable, name: string): Date | null {
  const m = /_p(\d{4})(\d{2})?(\d{2})?$/.exec(name);
  if (!m || !name.startsWith(`${table.parent}_p`)) return null;
  return new Date(Date.UTC(Number(m[1]), m[2] ? Number(m[2]) - 1 : 0, m[3] ? Number(m[3]) : 1));
}

export interface PartitionPass {
  created: string[];
  dropped: string[];
}

export class LuminairePartitions {
  /** Partitions known to exist (this process made or saw them). */
  private readonly known = new Set<string>();

  constructor(
    private readonly deps: Pick<ServiceDeps, 'knex' | 'clock' | 'logger'>,
    private readonly retention: LuminaireRetention = DEFAULT_LUMINAIRE_RETENTION,
  ) {}

  /** Makes sure the partitions for readings at these times exist (cheap when they are known). */
  async ensureFor(times: Date[]): Promise<string[]> {
    const created: string[] = [];
    for (const table of TABLES)
      for (const at of times) {
        const start = startOf(table.unit, at);
        const name = partitionName(table, start);
        if (this.known.has(name)) continue;
        await createPartition(this.deps.knex, {
          parent: table.parent,
          name,
          from: start,
          to: nextStart(table.unit, start),
        });
        this.known.add(name);
        created.push(name);
      }
    return created;
  }

  /** One housekeeping pass: the partitions of yesterday to a few days ahead, and expired ones dropped. */
  async maintain(): Promise<PartitionPass> {
    const now = this.deps.clock.now();
    const times = Array.from({ length: DAYS_AHEAD + 2 }, (_, i) => new Date(now.getTime() + (i - 1) * DAY_MS));
    const created = await this.ensureFor(times);
    const dropped: string[] = [];
    for (const table of TABLES) {
      const keepDays =
        table.parent === 'luminaire_points'
          ? this.retention.rawDays
          : table.parent === 'luminaire_hourly'
            ? this.retention.hourlyDays
            : null;
      if (keepDays === null) continue;
      const cutoff = now.getTime() - keepDays * DAY_MS;
      for (const name of await listPartitions(this.deps.knex, table.parent)) {
        const start = partitionStart(table, name);
        // Only when every row of it is past the retention: its end is before the cutoff.
        if (!start || nextStart(table.unit, start).getTime() > cutoff) continue;
        await dropPartition(this.deps.knex, name);
        this.known.delete(name);
        dropped.push(name);
      }
    }
    if (created.length || dropped.length)
      this.deps.logger.info({ created, dropped }, 'luminaire partitions created and dropped');
    return { created, dropped };
  }
}
