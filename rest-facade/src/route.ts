import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { z } from 'zod';
import type { Actor, Role } from '#core/shared/actor';
import { DomainError } from '#core/shared/errors';
import { zodToFieldErrors } from '#edge/problem';

export type HttpMethod = 'get' | 'post' | 'patch' | 'put' | 'delete';

export interface ResponseSpec {
  description: string;
  /** JSON body schema (documented in OpenAPI; responses in tests are validated against it). */
  schema?: z.ZodType;
  /** Non-JSON bodies (streams, files): the content type documented instead of a schema, or besides it (answered on `Accept`). */
  contentType?: string;
}

/** What every handler gets besides the request's parsed parts. */
export interface RouteEnv {
  actor: Actor;
  req: Request;
  res: Response;
  /**
   * Set when the request carries an Idempotency-Key: the handler does its writes in this
   * transaction, which also stores its answer for replays.
   */
  unitOfWork?: Knex.Transaction;
}

/** A handler's input: path parameters, query and body as its route's schemas parsed them. */
export interface RouteContext<P, Q, B> extends RouteEnv {
  params: P;
  query: Q;
  body: B;
}

/** What a handler returns: a status and a JSON body, or nothing when it wrote the response itself. */
export interface RouteResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Everything about a route but its handler: what the router and the OpenAPI document read. */
interface RouteInfo {
  method: HttpMethod;
  /** Express-style path below /api/v1, e.g. `/devices/:serial`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  /** `public` routes need no key (the OpenAPI document itself, login). Default: authenticated. */
  auth?: 'key' | 'public';
  /**
   * The JSON body may be left out (no content at all): the handler then gets what the body
   * schema makes of `{}`. A request that sends content must still send it as JSON.
   */
  bodyOptional?: boolean;
  /** Request bodies that are not JSON (multipart upload): documented, parsed by the handler. */
  requestContentType?: string;
  /** The fields of such a body, for the document only (the handler validates them). */
  requestSchema?: z.ZodType;
  /**
   * Idempotency-Key honoured. `requiredRole` is checked before a stored answer is looked up,
   * so a caller who may not run the operation never gets its replay. The handler must return
   * its result (not write the response itself).
   */
  idempotent?: { requiredRole: Role };
  responses: Record<number, ResponseSpec>;
}

/** A request whose parts passed the route's schemas, bound to its handler. */
export interface ParsedRequest {
  /** The parsed path parameters, query and body: what an Idempotency-Key's stored answer is tied to. */
  params: unknown;
  query: unknown;
  body: unknown;
  run(env: RouteEnv): Promise<RouteResult | undefined>;
}

/**
 * One REST operation in the route table: everything the router needs to authenticate, validate
 * and call one service method, and everything the OpenAPI document says about it. The table is
 * the single source for both, so an undocumented route cannot exist. Built by `defineRoute`.
 */
export interface RouteDef extends RouteInfo {
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  /** Parses the raw parts with the route's schemas (422 validation_failed) and binds the handler. */
  parse(raw: { params: unknown; query: unknown; body: unknown }): ParsedRequest;
}

/** A part's type as its schema parses it; a route without that schema gets nothing for it. */
export type Parsed<S extends z.ZodType | undefined> = S extends z.ZodType ? z.output<S> : undefined;

/**
 * A route whose handler's `params`, `query` and `body` are typed by the route's own schemas
 * (and are `undefined` where the route declares none).
 */
export function defineRoute<
  P extends z.ZodType | undefined = undefined,
  Q extends z.ZodType | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(
  route: RouteInfo & {
    params?: P;
    query?: Q;
    body?: B;
    handler: (ctx: RouteContext<Parsed<P>, Parsed<Q>, Parsed<B>>) => Promise<RouteResult | undefined>;
  },
): RouteDef {
  const { handler, ...info } = route;
  return {
    ...info,
    parse(raw) {
      const params = parsePart(route.params, raw.params, 'path');
      const query = parsePart(route.query, raw.query, 'query');
      const body = parsePart(route.body, raw.body, '');
      return { params, query, body, run: (env) => handler({ ...env, params, query, body }) };
    },
  };
}

function parsePart<S extends z.ZodType | undefined>(schema: S | undefined, value: unknown, prefix: string): Parsed<S> {
  // TypeScript does not narrow a conditional type through a check of its type parameter
  // (microsoft/TypeScript#33912): both returns are what Parsed<S> says for each branch.
  if (schema === undefined) return undefined as Parsed<S>;
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) {
    throw new DomainError(
      'validation_failed',
      prefix ? `Invalid ${prefix} parameters.` : 'The request has invalid fields.',
      { errors: zodToFieldErrors(parsed.error, prefix === 'path' || prefix === 'query' ? prefix : '') },
    );
  }
  return parsed.data as Parsed<S>;
}
