import type { Knex } from 'knex';

/** The last gate decision of deployments (for the deployment page and the APIs). */
export async function selectGateDecisions(
  knex: Knex,
  input: { accountId: string; deploymentIds: string[] },
): Promise<Array<{ deployment_id: string; decision: unknown; evaluated_at: Date; paused_at: Date | null }>> {
  return knex('deployment_fixture_gate')
    .where({ account_id: input.accountId })
    .whereIn('deployment_id', input.deploymentIds)
    .select('deployment_id', 'decision', 'evaluated_at', 'paused_at');
}

export async function saveGateDecision(
  db: Knex | Knex.Transaction,
  input: { accountId: string; deploymentId: string; decision: unknown; now: Date; paused: boolean },
): Promise<void> {
  await db.raw(
    `INSERT INTO deployment_fixture_gate (deployment_id, account_id, decision, evaluated_at, paused_at)
     VALUES (?, ?, ?::jsonb, ?, ?)
     ON CONFLICT (deployment_id) DO UPDATE SET decision = EXCLUDED.decision, evaluated_at = EXCLUDED.evaluated_at,
       paused_at = COALESCE(EXCLUDED.paused_at, deployment_fixture_gate.paused_at)`,
    [input.deploymentId, input.accountId, JSON.stringify(input.decision), input.now, input.paused ? input.now : null],
  );
}

/** Running deployments whose rollout names fixture signals (the gate pass walks them). */
export async function selectGatedDeployments(knex: Knex): Promise<
  Array<{
    id: string;
    account_id: string;
    model: string;
    target_version: string;
    started_at: Date | null;
    created_at: Date;
    rollout: Record<string, unknown>;
    paused_at: Date | null;
  }>
> {
  return knex('deployments as p')
    .join('models as m', 'm.id', 'p.model_id')
    .leftJoin('deployment_fixture_gate as g', 'g.deployment_id', 'p.id')
    .where('p.status', 'running')
    .whereRaw("jsonb_array_length(COALESCE(p.rollout -> 'fixture_signals', '[]'::jsonb)) > 0")
    .select(
      'p.id',
      'p.account_id',
      'm.name as model',
      'p.target_version',
      'p.started_at',
      'p.created_at',
      'p.rollout',
      'g.paused_at',
    );
}

/** One deployment of the account, for the canary-against-control view. */
export async function selectDeploymentForGate(
  knex: Knex,
  input: { accountId: string; deploymentId: string },
): Promise<
  | {
      id: string;
      account_id: string;
      model: string;
      target_version: string;
      started_at: Date | null;
      created_at: Date;
      rollout: Record<string, unknown> | null;
      status: string;
    }
  | undefined
> {
  return knex('deployments as p')
    .join('models as m', 'm.id', 'p.model_id')
    .where({ 'p.id': input.deploymentId, 'p.account_id': input.accountId })
    .first(
      'p.id',
      'p.account_id',
      'm.name as model',
      'p.target_version',
      'p.started_at',
      'p.created_at',
      'p.rollout',
      'p.status',
    );
}
