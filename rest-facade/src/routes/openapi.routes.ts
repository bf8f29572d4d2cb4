import { defineRoute, type RouteDef } from '../route';
import { buildOpenApiDocument } from '../openapi';

/** GET /api/v1/openapi.json: public, generated once from the route table it is part of. */
export function openApiRoute(routes: RouteDef[]): RouteDef {
  let document: Record<string, unknown> | undefined;
  return defineRoute({
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'This OpenAPI 3.1 document',
    tag: 'Meta',
    auth: 'public',
    responses: { 200: { description: 'The OpenAPI document', contentType: 'application/json' } },
    handler: () => {
      document ??= buildOpenApiDocument(routes, { version: '1.0.0' });
      return Promise.resolve({ status: 200, body: document });
    },
  });
}
