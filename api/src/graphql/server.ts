import type http from 'node:http';
import type { Duplex } from 'node:stream';
import express, { type Request, type Response, type NextFunction, type Router } from 'express';
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { expressMiddleware } from '@as-integrations/express5';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
  ApolloServerPluginUsageReportingDisabled,
} from '@apollo/server/plugin/disabled';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { OperationTypeNode, type GraphQLError, type GraphQLSchema } from 'graphql';
import type { Services } from '#core/services';
import { authenticateCaller, credentialsOf } from '../edge/caller';
import type { CallerRateLimit, RateCharge } from '../edge/rate-limit';
import type { Metrics } from '#core/metrics';
import type { Logger } from '#core/logger';
import type { EventBus } from '#core/events/event-bus';
import { DomainError } from '#core/shared/errors';
import { LiveEventHub } from '#core/events/live-hub';
import { loadTypeDefs } from './schema-files';
import type { GraphQLContext } from './context';
import { createLoaders } from './loaders';
import { formatGraphQLError, graphQLErrorFor } from './errors';
import { QUERY_LIMITS, costLimitMessage, limitValidationRules, operationCost, rateLimitUnits } from './limits';
import { nulInOperation } from './input-guards';
import { LiveViews } from './live/live-views';
import { createResolvers, liveReaders } from './resolvers/index';
import { attachGraphQLWebSocket } from './websocket';

export interface GraphQLDeps {
  services: Services;
  bus: EventBus;
  rateLimit: CallerRateLimit;
  metrics: Metrics;
  logger: Logger;
  maxJsonBodyBytes: number;
  /** Extra browser origins allowed to open cookie-authenticated WebSockets (PUBLIC_URL). */
  allowedOrigins?: string[];
}

export interface GraphQLMount {
  router: Router;
  schema: GraphQLSchema;
  live: LiveViews;
  /** For the one `upgrade` dispatcher of the HTTP server (path /graphql). */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Closes the subscriptions and their WebSockets (before the HTTP drain, which they would hold open). */
  closeSubscriptions(): Promise<void>;
  /** Stops Apollo (after the HTTP drain: requests under way still execute); closes subscriptions first. */
  stop(): Promise<void>;
}

export function buildSchema(): GraphQLSchema {
  return makeExecutableSchema({
    typeDefs: loadTypeDefs(),
    resolvers: createResolvers(),
  });
}

/**
 * GraphQL on the same HTTP server: Apollo Server over Express at /graphql, graphql-ws on the
 * same path for subscriptions. Both authenticate like REST and hand resolvers the same
 * services. Call `closeSubscriptions()` before the HTTP server drains and `stop()` after it.
 */
export async function createGraphQL(deps: GraphQLDeps): Promise<GraphQLMount> {
  const hub = new LiveEventHub(deps.bus, deps.logger);
  const live = new LiveViews(hub, liveReaders(deps.services), deps.logger, () => deps.metrics.liveEventsDropped.inc());
  const schema = buildSchema();
  const formatError = formatGraphQLError(deps.logger);
  const { rateLimit } = deps;
  const ws = attachGraphQLWebSocket({ ...deps, schema, live, formatError });

  const requirements: ApolloServerPlugin<GraphQLContext> = {
    // Apollo's hooks return promises; this one and willSendResponse have nothing to wait for.
    requestDidStart() {
      return Promise.resolve({
        async didResolveOperation({ operation, contextValue, document, request, response }) {
          // Cookie callers change state only with the session's CSRF token (reads need none).
          if (operation?.operation === OperationTypeNode.MUTATION && !contextValue.csrfValid) {
            throw graphQLErrorFor('csrf_failed', 'Missing or wrong x-csrf-token header for a session mutation.');
          }
          const nul = nulInOperation(document, request.variables);
          if (nul) throw nul;
          const cost = operationCost({
            schema,
            document,
            operationName: operation?.name?.value,
            variables: request.variables,
          });
          if (cost > QUERY_LIMITS.maxCost) throw graphQLErrorFor('query_too_complex', costLimitMessage(cost));
          // The context charged one unit; every further mutation field is charged here, before
          // any of them runs, so aliases cannot multiply what one unit buys.
          const extra = operation ? rateLimitUnits(document, operation) - 1 : 0;
          const charge = extra > 0 ? await rateLimit.charge(contextValue, extra) : null;
          if (charge) {
            for (const [name, value] of charge.headers) response.http.headers.set(name, value);
            if (!charge.allowed) throw rateLimitedError(charge);
          }
        },
        // Request hooks run only once the context exists (a refused caller never gets here).
        willSendResponse({ operation, errors }) {
          deps.metrics.graphqlOperations.inc({
            type: operation?.operation ?? 'invalid',
            outcome: errors?.length ? 'error' : 'ok',
          });
          return Promise.resolve();
        },
      });
    },
  };

  const apollo = new ApolloServer<GraphQLContext>({
    schema,
    // The process's lifecycle is main.ts's: with Apollo's own SIGTERM handler both stopped the
    // server at once, Apollo's stop waited on ours, and every SIGTERM ran into the 15 s watchdog.
    stopOnTerminationSignals: false,
    formatError,
    validationRules: limitValidationRules(),
    parseOptions: { maxTokens: QUERY_LIMITS.maxTokens },
    allowBatchedHttpRequests: false,
    includeStacktraceInErrorResponses: false,
    introspection: true,
    // Where the time went (bench/RESULTS.md): Apollo's default cache-control plugin wraps every
    // field resolver (willResolveField) and results were pretty-printed; neither is used here.
    // Parsed and validated documents are cached by query text (Apollo's document store).
    stringifyResult: (result) => JSON.stringify(result),
    plugins: [
      ApolloServerPluginLandingPageDisabled(),
      ApolloServerPluginCacheControlDisabled(),
      ApolloServerPluginInlineTraceDisabled(),
      ApolloServerPluginUsageReportingDisabled(),
      {
        serverWillStart() {
          return Promise.resolve({ drainServer: () => ws.dispose() });
        },
      },
      requirements,
    ],
  });
  await apollo.start();

  const context = async ({ req, res }: { req: Request; res: Response }): Promise<GraphQLContext> => {
    let caller;
    try {
      caller = await authenticateCaller(credentialsOf(req), deps.services);
    } catch (error) {
      if (error instanceof DomainError) throw graphQLErrorFor(error.code, error.message);
      throw error;
    }
    const charge = await rateLimit.charge(caller);
    if (charge) {
      for (const [name, value] of charge.headers) res.setHeader(name, value);
      if (!charge.allowed) throw rateLimitedError(charge);
    }
    return {
      actor: caller.actor,
      services: deps.services,
      loaders: createLoaders(caller.actor, deps.services),
      live,
      csrfValid: caller.csrfValid,
      ...(caller.user ? { user: caller.user } : {}),
      ...(caller.rateLimitPerMinute !== undefined ? { rateLimitPerMinute: caller.rateLimitPerMinute } : {}),
    };
  };

  const router = express.Router();
  router.use(express.json({ limit: deps.maxJsonBodyBytes }));
  router.use(expressMiddleware(apollo, { context }));
  // Body parser errors (malformed JSON, too large) answer in GraphQL's error shape.
  router.use((error: unknown, _req: Request, res: Response, next: NextFunction) => {
    const type = (error as { type?: string } | null)?.type;
    if (type === 'entity.parse.failed')
      return void res.status(400).json({
        errors: [{ message: 'The body is not valid JSON.', extensions: { code: 'malformed_json', status: 400 } }],
      });
    if (type === 'entity.too.large')
      return void res.status(413).json({
        errors: [
          {
            message: 'The body is larger than the documented limit.',
            extensions: { code: 'payload_too_large', status: 413 },
          },
        ],
      });
    next(error);
  });

  let subscriptionsClosed: Promise<void> | undefined;
  let stopped: Promise<void> | undefined;
  const closeSubscriptions = () =>
    (subscriptionsClosed ??= (async () => {
      live.close();
      hub.close();
      await ws.dispose();
    })());
  return {
    router,
    schema,
    live,
    handleUpgrade: (req, socket, head) => {
      ws.handleUpgrade(req, socket, head);
    },
    closeSubscriptions,
    stop: () =>
      (stopped ??= (async () => {
        await closeSubscriptions();
        await apollo.stop();
      })()),
  };
}

/** 429 with Retry-After. */
function rateLimitedError(charge: RateCharge): GraphQLError {
  return graphQLErrorFor('rate_limited', charge.message, {
    http: { headers: new Map([['retry-after', String(charge.retryAfterSeconds)]]) },
  });
}
