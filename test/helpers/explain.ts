import type { Knex } from 'knex';

/** A node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan. */
export interface PlanNode {
  'Node Type'?: string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Runs `sql` (knex `?` placeholders) under EXPLAIN (ANALYZE, FORMAT JSON): its plan's root. */
export async function explainAnalyze(
  db: Knex | Knex.Transaction,
  sql: string,
  bindings: readonly Knex.Value[],
): Promise<PlanNode> {
  const explained = await db.raw<{ rows: Array<{ 'QUERY PLAN': unknown }> }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
    bindings,
  );
  return rootOf(explained.rows[0]!['QUERY PLAN']);
}

/** The root of a JSON plan as the driver returns it (text on some databases, parsed on others). */
export function rootOf(plan: unknown): PlanNode {
  return (
    typeof plan === 'string' ? (JSON.parse(plan) as Array<{ Plan: PlanNode }>) : (plan as Array<{ Plan: PlanNode }>)
  )[0]!.Plan;
}

/** Rows the plan's scans of `relation` read: those they returned and those their filters dropped. */
export function rowsRead(node: PlanNode, relation: string): number {
  return (
    (node['Relation Name'] === relation
      ? ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1)
      : 0) + (node.Plans ?? []).reduce((sum, child) => sum + rowsRead(child, relation), 0)
  );
}
