import type { Knex } from 'knex';

/** The id of the model's firmware version with that sortable version key in the account, or null. */
export async function selectFirmwareVersionId(
  db: Knex | Knex.Transaction,
  input: { accountId: string; modelId: string; versionKey: string },
): Promise<string | null> {
  const row: { id: string } | undefined = await db('firmware_versions')
    .where({ account_id: input.accountId, model_id: input.modelId, version_key: input.versionKey })
    .first('id');
  return row?.id ?? null;
}
