import { z } from 'zod';
import type { Knex } from 'knex';
import type { ServiceDeps } from '../service-deps';
import { newId } from '../shared/ids';
import { DomainError } from '../shared/errors';
import { requireAdmin, type Actor } from '../shared/actor';
import type { FixtureModel } from './model-types';
import { insertModel, selectModelByName, selectModels, selectModelsByIds } from './store/models.store';

export type { FixtureModel } from './model-types';

export const RegisterModelInput = z.object({
  name: z
    .string()
    .trim()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9][A-Za-z0-9 ._:+-]*$/, 'letters, digits, space and . _ : + -'),
  description: z.string().max(2000).default(''),
});
export type RegisterModelInput = z.input<typeof RegisterModelInput>;

/** Fixture models are registered per account before devices or firmware of that model exist. */
export class ModelService {
  constructor(private readonly deps: ServiceDeps) {}

  async register(actor: Actor, raw: RegisterModelInput): Promise<FixtureModel> {
    requireAdmin(actor);
    const input = RegisterModelInput.parse(raw);
    const now = this.deps.clock.now();
    const model = { id: newId(), name: input.name, description: input.description };
    if (!(await insertModel(this.deps.knex, { accountId: actor.accountId, model, now }))) {
      throw new DomainError('already_exists', `Model "${input.name}" is registered already.`, {
        errors: [{ field: 'name', message: 'is taken' }],
      });
    }
    return { ...model, createdAt: now.toISOString() };
  }

  async list(actor: Actor): Promise<FixtureModel[]> {
    return selectModels(this.deps.knex, { accountId: actor.accountId });
  }

  /** The model of this account with that name, or 422 `unknown_model` (a model is registered before devices or firmware of it). */
  async requireByName(actor: Actor, name: string, trx?: Knex.Transaction, field = 'model'): Promise<FixtureModel> {
    const model = await selectModelByName(trx ?? this.deps.knex, { accountId: actor.accountId, name });
    if (!model) {
      throw new DomainError('unknown_model', `Model "${name}" is not registered for this account.`, {
        errors: [{ field, message: 'is not a registered model' }],
      });
    }
    return model;
  }

  /** Id to model within the account; used by presenters. */
  async byIds(actor: Actor, ids: string[]): Promise<Map<string, FixtureModel>> {
    if (ids.length === 0) return new Map();
    const models = await selectModelsByIds(this.deps.knex, { accountId: actor.accountId, ids });
    return new Map(models.map((m) => [m.id, m]));
  }
}
