import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { CreateApiKeyInput } from '#core/accounts/api-key.service';
import { IdParams } from '../schemas/common';
import { ApiKeySchema } from '../schemas/api-keys.schemas';
import { presentApiKey } from '../presenters/api-keys.presenter';

export function apiKeyRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api-keys',
      operationId: 'listApiKeys',
      summary: 'List the API keys of the account (secrets are never shown again)',
      tag: 'API keys',
      responses: { 200: { description: 'The keys', schema: z.object({ api_keys: z.array(ApiKeySchema) }) } },
      handler: async ({ actor }) => ({
        status: 200,
        body: { api_keys: (await services.apiKeys.list(actor)).map(presentApiKey) },
      }),
    }),
    defineRoute({
      method: 'post',
      path: '/api-keys',
      operationId: 'createApiKey',
      summary: 'Create an API key; the secret is in this response only',
      tag: 'API keys',
      body: CreateApiKeyInput.strict(),
      responses: {
        201: { description: 'Created', schema: z.object({ api_key: ApiKeySchema, secret: z.string() }) },
      },
      handler: async ({ actor, body }) => {
        const created = await services.apiKeys.create(actor, body);
        return { status: 201, body: { api_key: presentApiKey(created.apiKey), secret: created.secret } };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api-keys/:id',
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key (immediately refused afterwards)',
      tag: 'API keys',
      params: IdParams,
      responses: { 200: { description: 'Revoked', schema: z.object({ api_key: ApiKeySchema }) } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: { api_key: presentApiKey(await services.apiKeys.revoke(actor, params.id)) },
      }),
    }),
  ];
}
