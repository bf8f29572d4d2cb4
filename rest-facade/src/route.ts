import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { z } from 'zod';
import type { Actor, Role } from '../../api/src/domain/shared/actor';

export type HttpMethod = 'get' | 'post' | 'patch' | 'put' | 'delete';

export interface ResponseSpec {
  description: string;
  /** JSON body schema (documented in OpenAPI; responses in tests are validated against it). */
  schema?: z.ZodType;
  /** Non-JSON bodies (streams, files): the content type documented instead of a schema. */
  contentType?: string;
}

export interface RouteContext<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  actor: Actor;
  params: P;
  query: Q;
  body: B;
  req: Request;
  res: Response;
  /**
   * Set when the request carries an Idempotency-Key: the handler does its writes in this
   * transaction, which also stores its answer for replays.
   */
  unitOfWork?: Knex.Transaction;
}

/** What a handler returns: a status and a JSON body, or nothing when it wrote the response itself. */
export interface RouteResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * One REST operation: everything the router needs to authenticate, validate and call one
 * service method, and everything the OpenAPI document says about it. The route table is the
 * single source for both, so an undocumented route cannot exist.
 */
export interface RouteDef {
  method: HttpMethod;
  /** Express-style path below /api/v1, e.g. `/devices/:serial`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  /** `public` routes need no key (the OpenAPI document itself, login). Default: authenticated. */
  auth?: 'key' | 'public';
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
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
  // The handler's typed context comes from its own zod schemas; the table holds it loosely.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- params/query/body typed per route
  handler: (ctx: RouteContext<any, any, any>) => Promise<RouteResult | void>;
}
