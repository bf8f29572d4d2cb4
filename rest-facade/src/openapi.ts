import { z } from 'zod';
import type { RouteDef } from './route';
import { ProblemSchema } from './schemas/common';

type JsonSchema = Record<string, unknown>;

/**
 * The OpenAPI 3.1 document, generated from the same route table and zod schemas the router
 * validates with, so it always matches what the server does. Named schemas (`.meta({ id })`)
 * become components.
 */
export function buildOpenApiDocument(routes: RouteDef[], info: { version: string }): JsonSchema {
  const components: Record<string, JsonSchema> = {};
  const convert = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
    const json = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
    delete json.$schema;
    const defs = (json.$defs ?? {}) as Record<string, JsonSchema>;
    delete json.$defs;
    for (const [name, def] of Object.entries(defs)) components[name] = rewriteRefs(def);
    return rewriteRefs(json);
  };
  const problemRef = { $ref: '#/components/schemas/Problem' };
  convert(ProblemSchema, 'output'); // registers the Problem component

  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = '/api/v1' + route.path.replace(/:([A-Za-z_]+)/g, '{$1}');
    const parameters: unknown[] = [];
    if (route.params) {
      const json = convert(route.params, 'input') as { properties?: Record<string, JsonSchema> };
      for (const [name, schema] of Object.entries(json.properties ?? {}))
        parameters.push({ name, in: 'path', required: true, schema });
    }
    if (route.query) {
      const json = convert(route.query, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
      for (const [name, schema] of Object.entries(json.properties ?? {})) {
        parameters.push({ name, in: 'query', required: json.required?.includes(name) ?? false, schema });
      }
    }
    if (route.idempotent) {
      parameters.push({
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        schema: { type: 'string', maxLength: 255 },
        description:
          'Retrying with the same key, path and body replays the first response (24 h), only to the API key or user that sent it; the key on another path or with another body is 422 idempotency_key_reused.',
      });
    }
    const responses: Record<string, unknown> = {};
    for (const [status, spec] of Object.entries(route.responses)) {
      responses[status] = {
        description: spec.description,
        // A schema and a content type together: JSON by default, the other type on `Accept` (CSV).
        ...(spec.schema || spec.contentType
          ? {
              content: {
                ...(spec.schema ? { 'application/json': { schema: convert(spec.schema, 'output') } } : {}),
                ...(spec.contentType ? { [spec.contentType]: {} } : {}),
              },
            }
          : {}),
      };
    }
    const errorStatuses = route.auth === 'public' ? ['400', '422'] : ['400', '401', '403', '404', '422', '429'];
    for (const status of errorStatuses) {
      responses[status] ??= { description: 'Error', content: { 'application/problem+json': { schema: problemRef } } };
    }
    responses.default ??= { description: 'Error', content: { 'application/problem+json': { schema: problemRef } } };
    const operation: Record<string, unknown> = {
      operationId: route.operationId,
      summary: route.summary,
      tags: [route.tag],
      ...(parameters.length ? { parameters } : {}),
      responses,
      ...(route.auth === 'public' ? { security: [] } : {}),
    };
    if (route.body) {
      operation.requestBody = {
        required: route.bodyOptional !== true,
        content: { 'application/json': { schema: convert(route.body, 'input') } },
      };
    } else if (route.requestContentType) {
      operation.requestBody = {
        required: true,
        content: {
          [route.requestContentType]: route.requestSchema ? { schema: convert(route.requestSchema, 'input') } : {},
        },
      };
    }
    (paths[path] ??= {})[route.method] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Fleet service REST API',
      version: info.version,
      description:
        'Device fleet management for lighting manufacturers. Authenticate with "Authorization: Bearer <API key>". ' +
        'Errors are application/problem+json (RFC 9457) with a stable `code`. 100 requests per minute per key.',
    },
    servers: [{ url: '/' }],
    security: [{ bearerAuth: [] }],
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'API key from Settings > API Keys' },
      },
      schemas: components,
    },
    paths,
  };
}

function rewriteRefs<T>(value: T): T {
  return JSON.parse(JSON.stringify(value).replaceAll('"#/$defs/', '"#/components/schemas/')) as T;
}
