import type http from 'node:http';
import type { Duplex } from 'node:stream';
import {
  GraphQLError,
  parse,
  validate,
  execute,
  specifiedRules,
  getOperationAST,
  OperationTypeNode,
  type GraphQLSchema,
  type GraphQLFormattedError,
  type DocumentNode,
} from 'graphql';
import { WebSocketServer, type WebSocket } from 'ws';
import { useServer } from 'graphql-ws/use/ws';
import { CloseCode } from 'graphql-ws';
import type { Services } from '#core/services';
import { authenticateCaller, credentialsToRecheck, headerValue, type Caller } from '../edge/caller';
import type { CallerRateLimit, RateCharge } from '../edge/rate-limit';
import type { Metrics } from '#core/metrics';
import type { Logger } from '#core/logger';
import { DomainError } from '#core/shared/errors';
import type { GraphQLContext } from './context';
import { createLoaders } from './loaders';
import { QUERY_LIMITS, costLimitMessage, limitValidationRules, operationCost, rateLimitUnits } from './limits';
import { nulInOperation } from './input-guards';
import type { LiveViews } from './live/live-views';
import { sharedSubscribe } from './live/shared-execution';

/** Open sockets re-check their credentials this often (ms): logout, expiry, revocation elsewhere. */
const RECHECK_MS = 30_000;
/** Close code for credentials that stopped being valid (graphql-ws uses 4403 for Forbidden). */
const FORBIDDEN = CloseCode.Forbidden;

interface Connection {
  socket: WebSocket;
  caller: Caller;
}

/**
 * graphql-ws on the HTTP server's `upgrade` (path /graphql, dispatched by http-server.ts). Auth at
 * `connection_init`: `connectionParams.authorization` (Bearer key), else the session cookie of
 * the upgrade request, which is only trusted from the service's own origin (cross-site
 * WebSocket hijacking). Same limits as HTTP; API-key subscribes count against the key's rate
 * limit; a revoked key's sockets close at once (4403), and every socket re-checks its
 * credentials periodically.
 */
export function attachGraphQLWebSocket(deps: {
  schema: GraphQLSchema;
  services: Services;
  rateLimit: CallerRateLimit;
  metrics: Metrics;
  logger: Logger;
  live: LiveViews;
  maxJsonBodyBytes: number;
  allowedOrigins?: string[];
  formatError: (formatted: GraphQLFormattedError, raw: unknown) => GraphQLFormattedError;
}) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: deps.maxJsonBodyBytes });
  const connections = new Map<object, Connection>();
  const rules = [...specifiedRules, ...limitValidationRules()];

  const format = (errors: readonly GraphQLError[]) => errors.map((e) => deps.formatError(e.toJSON(), e));
  /**
   * Parsed and validated documents by query text: 200 portals sending the same subscription
   * share one DocumentNode (parse and validate once), which also lets their event results be
   * shared (live/shared-execution.ts).
   */
  const documents = new Map<string, { document: DocumentNode; errors: readonly GraphQLError[] }>();
  const MAX_DOCUMENTS = 1000;

  const cleanup = useServer<Record<string, unknown>, { connection?: Connection }>(
    {
      schema: deps.schema,
      // The same graphql module instance that built the schema (graphql-ws could load another
      // copy, CJS vs ESM, and refuse the schema as coming "from another realm").
      execute,
      subscribe: sharedSubscribe((contextValue) => (contextValue as GraphQLContext).actor.accountId),
      validate,
      onConnect: async (ctx) => {
        const params = ctx.connectionParams ?? {};
        const authorization =
          typeof params.authorization === 'string'
            ? params.authorization
            : typeof params.Authorization === 'string'
              ? params.Authorization
              : undefined;
        const request = ctx.extra.request;
        if (!authorization && !sameOrigin(request, deps.allowedOrigins ?? [])) return false;
        try {
          const caller = await authenticateCaller(
            { authorization, cookie: authorization ? undefined : headerValue(request.headers.cookie) },
            deps.services,
          );
          const connection = { socket: ctx.extra.socket, caller };
          ctx.extra.connection = connection;
          connections.set(ctx.extra.socket, connection);
          deps.metrics.graphqlSockets.inc();
          return true;
        } catch (error) {
          if (!(error instanceof DomainError)) deps.logger.error({ err: error }, 'graphql-ws authentication failed');
          return false;
        }
      },
      onClose: (ctx) => {
        if (connections.delete(ctx.extra.socket)) deps.metrics.graphqlSockets.dec();
      },
      onSubscribe: async (ctx, _id, payload) => {
        const connection = ctx.extra.connection;
        if (!connection) return [new GraphQLError('Not authenticated.', { extensions: { code: 'unauthenticated' } })];
        const { caller } = connection;
        const charge = await deps.rateLimit.charge(caller);
        if (charge && !charge.allowed) return [rateLimitedError(charge)];
        let cached = documents.get(payload.query);
        if (!cached) {
          let parsed: DocumentNode;
          try {
            parsed = parse(payload.query, { maxTokens: QUERY_LIMITS.maxTokens });
          } catch (error) {
            const message = (error as Error).message;
            const f = deps.formatError({ message, extensions: { code: 'GRAPHQL_PARSE_FAILED' } }, error);
            return [new GraphQLError(f.message, { extensions: f.extensions ?? {} })];
          }
          cached = { document: parsed, errors: validate(deps.schema, parsed, rules) };
          if (documents.size >= MAX_DOCUMENTS) documents.clear();
          documents.set(payload.query, cached);
        }
        const { document, errors } = cached;
        if (errors.length) {
          // Tagged like Apollo's HTTP validation errors so the one mapping treats both alike.
          return errors.map((e) => {
            const f = deps.formatError({ message: e.message, extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }, e);
            return new GraphQLError(f.message, { extensions: f.extensions ?? {} });
          });
        }
        const operation = getOperationAST(document, payload.operationName);
        if (operation?.operation === OperationTypeNode.MUTATION && caller.sessionToken) {
          // Cookie callers mutate over HTTP, where the CSRF token is checked.
          return [
            new GraphQLError('Send mutations over HTTP with the x-csrf-token header.', {
              extensions: { code: 'bad_request', status: 400 },
            }),
          ];
        }
        // Aliased mutations: every top-level field past the first costs one more unit (as over HTTP).
        const extra = operation ? rateLimitUnits(document, operation) - 1 : 0;
        const extraCharge = extra > 0 ? await deps.rateLimit.charge(caller, extra) : null;
        if (extraCharge && !extraCharge.allowed) return [rateLimitedError(extraCharge)];
        const nul = nulInOperation(document, payload.variables);
        if (nul) {
          const f = deps.formatError(nul.toJSON(), nul);
          return [new GraphQLError(f.message, { extensions: f.extensions ?? {} })];
        }
        const cost = operationCost({
          schema: deps.schema,
          document,
          operationName: payload.operationName,
          variables: payload.variables,
        });
        if (cost > QUERY_LIMITS.maxCost) {
          return [new GraphQLError(costLimitMessage(cost), { extensions: { code: 'query_too_complex', status: 400 } })];
        }
        const contextValue: GraphQLContext = {
          actor: caller.actor,
          services: deps.services,
          loaders: createLoaders(caller.actor, deps.services),
          live: deps.live,
          csrfValid: true,
          ...(caller.user ? { user: caller.user } : {}),
        };
        return {
          schema: deps.schema,
          document,
          contextValue,
          ...(payload.operationName ? { operationName: payload.operationName } : {}),
          ...(payload.variables ? { variableValues: payload.variables } : {}),
        };
      },
      onNext: (_ctx, _id, _payload, _args, result) => {
        if (!result.errors?.length) return result;
        return { ...result, errors: format(result.errors) };
      },
    },
    wss,
  );

  const closeWhere = (predicate: (c: Connection) => boolean, reason: string) => {
    for (const connection of connections.values()) {
      if (predicate(connection)) connection.socket.close(FORBIDDEN, reason);
    }
  };
  const stopRevoked = deps.services.apiKeys.onRevoked((keyId) =>
    closeWhere((c) => c.caller.actor.apiKeyId === keyId, 'API key revoked'),
  );
  const recheck = setInterval(() => {
    for (const connection of connections.values()) {
      const { caller } = connection;
      authenticateCaller(credentialsToRecheck(caller), deps.services).catch((error: unknown) => {
        if (error instanceof DomainError) connection.socket.close(FORBIDDEN, 'Credentials are no longer valid');
      });
    }
  }, RECHECK_MS);
  recheck.unref();

  let disposed: Promise<void> | undefined;
  return {
    handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
      wss.handleUpgrade(req, socket, head, (client) => wss.emit('connection', client, req));
    },
    /** Closes every socket (1001 going away) and stops the timers. */
    dispose: () =>
      (disposed ??= (async () => {
        clearInterval(recheck);
        stopRevoked();
        for (const client of wss.clients) client.close(1001, 'Server shutting down');
        await cleanup.dispose();
        for (const client of wss.clients) client.terminate();
      })()),
  };
}

function rateLimitedError(charge: RateCharge): GraphQLError {
  return new GraphQLError(charge.message, {
    extensions: { code: 'rate_limited', status: 429, retryAfter: charge.retryAfterSeconds },
  });
}

/**
 * Browsers always send Origin on WebSocket upgrades; a cookie is only trusted when it is the
 * service's own origin (Host) or an allowed one. Non-browser clients send no Origin.
 */
function sameOrigin(request: http.IncomingMessage, allowed: string[]): boolean {
  const origin = headerValue(request.headers.origin);
  if (!origin) return true;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return false;
  }
  if (host === request.headers.host) return true;
  return allowed.some((a) => {
    try {
      return new URL(a).host === host;
    } catch {
      return false;
    }
  });
}
