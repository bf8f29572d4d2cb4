import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { RegisterModelInput } from '#core/models/model.service';
import { ModelSchema } from '../schemas/models.schemas';
import { presentModel } from '../presenters/models.presenter';

/** Fixture models: registered per account before devices or firmware of that model. */
export function modelRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/models',
      operationId: 'listModels',
      summary: 'Registered fixture models of the account, by name',
      tag: 'Models',
      responses: { 200: { description: 'The models', schema: z.object({ models: z.array(ModelSchema) }) } },
      handler: async ({ actor }) => ({
        status: 200,
        body: { models: (await services.models.list(actor)).map(presentModel) },
      }),
    }),
    defineRoute({
      method: 'post',
      path: '/models',
      operationId: 'registerModel',
      summary: 'Register a fixture model (409 already_exists when the name is taken in the account)',
      tag: 'Models',
      body: RegisterModelInput.strict(),
      responses: { 201: { description: 'Registered', schema: z.object({ model: ModelSchema }) } },
      handler: async ({ actor, body }) => ({
        status: 201,
        body: { model: presentModel(await services.models.register(actor, body)) },
      }),
    }),
  ];
}
