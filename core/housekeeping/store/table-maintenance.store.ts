import type { Knex } from 'knex';

/** A table that is due for VACUUM, ANALYZE or both, by PostgreSQL's own autovacuum rules. */
export interface TableDue {
  /** Schema-qualified and quoted by PostgreSQL (quote_ident): safe to put in a statement. */
  name: string;
  vacuum: boolean;
  analyze: boolean;
}

/**
 * The tables autovacuum would process now, with its thresholds read from the database's own
 * settings (autovacuum_*): dead rows above threshold + scale factor x rows, rows inserted since
 * the last vacuum likewise (so index-only scans keep their visibility map), a table older than
 * autovacuum_freeze_max_age transactions or autovacuum_multixact_freeze_max_age multixacts
 * (wraparound), and rows changed since the last ANALYZE. The system catalogs and
 * information_schema's tables count too, as they do for autovacuum: the database's oldest
 * transaction id only moves on once every table of it was vacuumed. Partitioned parents hold no
 * rows: their partitions are listed.
 */
export async function selectTablesDue(db: Knex): Promise<TableDue[]> {
  const { rows } = await db.raw<{ rows: TableDue[] }>(
    `WITH settings AS (
       SELECT current_setting('autovacuum_vacuum_threshold')::float8 AS vac_base,
              current_setting('autovacuum_vacuum_scale_factor')::float8 AS vac_scale,
              current_setting('autovacuum_vacuum_insert_threshold')::float8 AS ins_base,
              current_setting('autovacuum_vacuum_insert_scale_factor')::float8 AS ins_scale,
              current_setting('autovacuum_analyze_threshold')::float8 AS an_base,
              current_setting('autovacuum_analyze_scale_factor')::float8 AS an_scale,
              current_setting('autovacuum_freeze_max_age')::float8 AS freeze_age,
              current_setting('autovacuum_multixact_freeze_max_age')::float8 AS multixact_age),
     tables AS (
       SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS name,
              greatest(c.reltuples, 0) AS tuples,
              age(c.relfrozenxid) AS xid_age,
              mxid_age(c.relminmxid) AS mxid_age,
              coalesce(s.n_dead_tup, 0) AS dead,
              coalesce(s.n_ins_since_vacuum, 0) AS inserted,
              coalesce(s.n_mod_since_analyze, 0) AS modified
         FROM pg_class c
         JOIN pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
        WHERE c.relkind IN ('r', 'm') AND c.relpersistence = 'p'),
     due AS (
       SELECT name,
              dead > vac_base + vac_scale * tuples
                OR inserted > ins_base + ins_scale * tuples
                OR xid_age > freeze_age
                OR mxid_age > multixact_age AS "vacuum",
              modified > an_base + an_scale * tuples AS "analyze"
         FROM tables, settings)
     SELECT name, "vacuum", "analyze" FROM due
      WHERE "vacuum" OR "analyze"
      ORDER BY name`,
  );
  return rows;
}

/** VACUUM and/or ANALYZE one table (`name` as selectTablesDue gave it). Never in a transaction. */
export async function maintainTable(db: Knex, table: TableDue): Promise<void> {
  // knex reads `?` as a binding: a quoted name may hold one.
  const name = table.name.replace(/\?/g, '\\?');
  if (table.vacuum) await db.raw(`VACUUM ${table.analyze ? '(ANALYZE) ' : ''}${name}`);
  else if (table.analyze) await db.raw(`ANALYZE ${name}`);
}
