import { z } from 'zod';
import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { newId } from '../shared/ids';
import { DomainError } from '../shared/errors';
import { requireAdmin, type Actor } from '../shared/actor';

export const RegisterModelInput = z.object({
  name: z.string().trim().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9 ._:+-]*$/, 'letters, digits, space and . _ : + -'),
  description: z.string().max(2000).default(''),
});
export type RegisterModelInput = z.input<typeof RegisterModelInput>;

export interface FixtureModel {
  id: string;
  name: string;
  description: string;
  createdAt: string;
}

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

/** Fixture models are registered per account before devices or firmware of that model exist. */
export class ModelService {
  constructor(private readonly deps: ServiceDeps) {}

  async register(actor: Actor, raw: RegisterModelInput): Promise<FixtureModel> {
    requireAdmin(actor);
    const input = RegisterModelInput.parse(raw);
    const row: ModelRow = { id: newId(), account_id: actor.accountId, name: input.name, description: input.description, created_at: this.deps.clock.now() };
    const inserted = await this.deps.knex('models').insert(row).onConflict(['account_id', 'name']).ignore().returning('id');
    if (inserted.length === 0) {
      throw new DomainError('already_exists', `Model "${input.name}" is registered already.`, { errors: [{ field: 'name', message: 'is taken' }] });
    }
    return toModel(row);
  }

  async list(actor: Actor): Promise<FixtureModel[]> {
    const rows = (await this.deps.knex('models').where({ account_id: actor.accountId }).orderBy('name')) as ModelRow[];
    return rows.map(toModel);
  }

  /** The model of this account with that name, or 422 `unknown_model` (decisions.md "Models"). */
  async requireByName(actor: Actor, name: string, trx?: Knex.Transaction, field = 'model'): Promise<FixtureModel> {
    const row = (await (trx ?? this.deps.knex)('models').where({ account_id: actor.accountId, name }).first()) as ModelRow | undefined;
    if (!row) {
      throw new DomainError('unknown_model', `Model "${name}" is not registered for this account.`, {
        errors: [{ field, message: 'is not a registered model' }],
      });
    }
    return toModel(row);
  }

  /** Id to model within the account; used by presenters. */
  async byIds(actor: Actor, ids: string[]): Promise<Map<string, FixtureModel>> {
    if (ids.length === 0) return new Map();
    const rows = (await this.deps.knex('models').where({ account_id: actor.accountId }).whereIn('id', ids)) as ModelRow[];
    return new Map(rows.map((r) => [r.id, toModel(r)]));
  }
}
