import type { Knex } from 'knex';

/** DDL of the luminaire tables' time partitions (names and bounds come from luminaire-partitions.ts). */

/** The partitions of a partitioned table, by name. */
export async function listPartitions(knex: Knex, parent: string): Promise<string[]> {
  const result = await knex.raw<{ rows: Array<{ name: string }> }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = ?::regclass ORDER BY c.relname`,
    [parent],
  );
  return result.rows.map((r) => r.name);
}

/**
 * Creates a partition unless it exists. Names and bounds are made by the service (never from
 * input); two processes creating the same one at once: the loser's error is taken as done.
 */
export async function createPartition(
  knex: Knex,
  input: { parent: string; name: string; from: Date; to: Date },
): Promise<void> {
  try {
    await knex.raw(
      `CREATE TABLE IF NOT EXISTS ${input.name} PARTITION OF ${input.parent}
         FOR VALUES FROM ('${input.from.toISOString()}') TO ('${input.to.toISOString()}')`,
    );
  } catch (err) {
    const again = await listPartitions(knex, input.parent);
    if (!again.includes(input.name)) throw err;
  }
}

/** Drops a whole partition: its rows go at once, with no dead tuples left to vacuum. */
export async function dropPartition(knex: Knex, name: string): Promise<void> {
  await knex.raw(`DROP TABLE IF EXISTS ${name}`);
}
