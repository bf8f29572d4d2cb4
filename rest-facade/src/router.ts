import express, { type Request, type Response, type NextFunction, type Router } from 'express';
import type { RouteDef, RouteResult } from './route';
import { authenticateCaller, credentialsOf, requireCsrfFor, type Caller } from '#edge/caller';
import type { CallerRateLimit } from '#edge/rate-limit';
import { problem, sendProblem, problemErrorHandler } from '#edge/problem';
import { findNul } from '#edge/nul-guard';
import { DomainError } from '#core/shared/errors';
import type { ApiKeyService } from '#core/accounts/api-key.service';
import type { UserService } from '#core/accounts/user.service';
import type { IdempotencyService } from '#core/shared/idempotency.service';
import type { Metrics } from '#core/metrics';
import type { Logger } from '#core/logger';

export interface RestRouterDeps {
  apiKeys: ApiKeyService;
  users: UserService;
  idempotency: IdempotencyService;
  rateLimit: CallerRateLimit;
  metrics: Metrics;
  logger: Logger;
  maxJsonBodyBytes: number;
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * Builds /api/v1 from the route table. Each request reads top to bottom: authenticate, rate
 * limit, check content type, parse the JSON body (only now, so an unauthenticated or throttled
 * caller never makes the service read a body), validate params, query and body with the route's
 * schemas, honour Idempotency-Key, call the handler (one service call), send JSON. Every error
 * is problem+json.
 */
export function createRestRouter(routes: RouteDef[], deps: RestRouterDeps): Router {
  const router = express.Router();
  const jsonParser = express.json({ limit: deps.maxJsonBodyBytes, type: JSON_TYPES, strict: false });
  /** Who is calling, from `admit` to `handle` (public routes have no caller). */
  const callers = new WeakMap<Request, Caller>();

  for (const route of routes) {
    const admit = async (req: Request, res: Response, next: NextFunction): Promise<void> => {
      const started = process.hrtime.bigint();
      res.on('finish', () => {
        deps.metrics.httpRequests.inc({ method: route.method, route: route.path, status: String(res.statusCode) });
        deps.metrics.httpDuration.observe(
          { method: route.method, route: route.path },
          Number(process.hrtime.bigint() - started) / 1e9,
        );
      });
      if (route.auth !== 'public') {
        const caller = await authenticateCaller(credentialsOf(req), deps);
        requireCsrfFor(req.method, caller);
        const charge = await deps.rateLimit.charge(caller);
        if (charge) {
          for (const [name, value] of charge.headers) res.setHeader(name, value);
          if (!charge.allowed) {
            sendProblem(res, problem('rate_limited', charge.message), charge.retryAfterSeconds);
            return;
          }
        }
        callers.set(req, caller);
      }
      if (route.body && !req.is(JSON_TYPES) && !(route.bodyOptional && hasNoContent(req))) {
        throw new DomainError('unsupported_media_type', 'Send the body as application/json.');
      }
      next();
    };

    const handle = async (req: Request, res: Response): Promise<void> => {
      // PostgreSQL text cannot hold NUL; refuse it at the edge for every field (OWASP API8).
      const nulAt =
        findNul(req.params, 'path') ?? findNul(req.query, 'query') ?? (route.body ? findNul(req.body, '') : null);
      if (nulAt !== null) {
        throw new DomainError('validation_failed', 'Text may not contain NUL characters.', {
          errors: [{ field: nulAt || '(body)', message: 'contains a NUL character' }],
        });
      }
      const request = route.parse({
        params: req.params,
        query: req.query,
        body: route.body ? req.body : undefined,
      });
      const caller = callers.get(req);
      const actor = caller?.actor ?? { accountId: '', role: 'viewer' as const, principal: 'anonymous' };

      const idempotencyKey = route.idempotent ? req.get('Idempotency-Key') : undefined;
      if (route.idempotent && idempotencyKey !== undefined && caller) {
        const outcome = await deps.idempotency.run(
          {
            actor,
            key: idempotencyKey,
            operation: route.operationId,
            // The path too: the same key and body for another device is another request.
            target: { params: request.params, query: request.query },
            body: request.body,
            requiredRole: route.idempotent.requiredRole,
          },
          async (unitOfWork) => {
            const result = await request.run({ actor, req, res, unitOfWork });
            if (!result) throw new Error(`${route.operationId}: an idempotent handler must return its result`);
            return result;
          },
        );
        if (outcome.kind === 'replayed') {
          res.setHeader('Idempotent-Replayed', 'true');
          res.status(outcome.status).json(outcome.body);
        } else {
          send(res, outcome.response);
        }
        return;
      }
      const result = await request.run({ actor, req, res });
      if (result) send(res, result);
    };

    // Express 5 passes a rejected handler's error on to the error handler below.
    if (route.body) router[route.method](route.path, admit, jsonParser, handle);
    else router[route.method](route.path, admit, handle);
  }

  router.use((req: Request, res: Response) => {
    sendProblem(res, problem('not_found', `No route ${req.method} ${req.baseUrl}${req.path}.`));
  });
  router.use(problemErrorHandler(deps.logger));
  return router;
}

/** A request without content: no Transfer-Encoding, and no Content-Length or a zero one. */
function hasNoContent(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
}

function send(res: Response, result: RouteResult): void {
  if (result.headers) for (const [name, value] of Object.entries(result.headers)) res.setHeader(name, value);
  if (result.body === undefined) res.status(result.status).end();
  else res.status(result.status).json(result.body);
}
