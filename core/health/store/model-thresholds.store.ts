import type { Knex } from 'knex';

/** Each model of the account by name, with its health overrides (null: none). */
export async function selectModelThresholds(
  knex: Knex,
  input: { accountId: string },
): Promise<Map<string, Record<string, number> | null>> {
  const result = await knex.raw<{ rows: Array<{ name: string; health_thresholds: Record<string, number> | null }> }>(
    'SELECT name, health_thresholds FROM models WHERE account_id = ?',
    [input.accountId],
  );
  return new Map(result.rows.map((r) => [r.name, r.health_thresholds]));
}

export async function updateModelThresholds(
  knex: Knex,
  input: { accountId: string; model: string; overrides: Record<string, number> },
): Promise<boolean> {
  const n = await knex('models')
    .where({ account_id: input.accountId, name: input.model })
    .update({ health_thresholds: Object.keys(input.overrides).length > 0 ? JSON.stringify(input.overrides) : null });
  return n > 0;
}

export async function selectDeviceIdOf(
  knex: Knex,
  input: { accountId: string; serial: string },
): Promise<string | undefined> {
  const result = await knex.raw<{ rows: Array<{ id: string }> }>(
    'SELECT id FROM devices WHERE account_id = ? AND serial = ?',
    [input.accountId, input.serial],
  );
  return result.rows[0]?.id;
}
