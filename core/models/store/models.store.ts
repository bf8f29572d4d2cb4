import type { FixtureModel } from '../model-types';
import type { Db } from '../../db/db';

/** Fixture models (`models`), unique by name per account; every read is scoped by `account_id`. */

interface ModelRow {
  id: string;
  account_id: string;
  name: string;
  description: string;
  created_at: Date;
}

const toModel = (row: ModelRow): FixtureModel => ({
  id: row.id,
  name: row.name,
  description: row.description,
  createdAt: new Date(row.created_at).toISOString(),
});

/** Registers the model; false (nothing written) when the account has one of that name. */
export async function insertModel(
  db: Db,
  input: { accountId: string; model: { id: string; name: string; description: string }; now: Date },
): Promise<boolean> {
  const row: ModelRow = {
    id: input.model.id,
    account_id: input.accountId,
    name: input.model.name,
    description: input.model.description,
    created_at: input.now,
  };
  const inserted = await db('models').insert(row).onConflict(['account_id', 'name']).ignore().returning('id');
  return inserted.length > 0;
}

/** The account's models by name. */
export async function selectModels(db: Db, input: { accountId: string }): Promise<FixtureModel[]> {
  const rows = await db<ModelRow>('models').where({ account_id: input.accountId }).orderBy('name');
  return rows.map(toModel);
}

export async function selectModelByName(
  db: Db,
  input: { accountId: string; name: string },
): Promise<FixtureModel | null> {
  const row = await db<ModelRow>('models').where({ account_id: input.accountId, name: input.name }).first();
  return row ? toModel(row) : null;
}

/** The account's models among these ids (others' and unknown ids are absent). */
export async function selectModelsByIds(db: Db, input: { accountId: string; ids: string[] }): Promise<FixtureModel[]> {
  const rows = await db<ModelRow>('models').where({ account_id: input.accountId }).whereIn('id', input.ids);
  return rows.map(toModel);
}
