import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, CombinedGraphQLErrors, ServerError } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { isSubscriptionOperation } from '@apollo/client/utilities';
import { createClient, type Client } from 'graphql-ws';
import { session } from '../session';
import { ApiError } from './rest';

/**
 * Every fetch of the HTTP link: the session cookie goes along, mutations carry the CSRF token,
 * and a 401 (session expired or logged out elsewhere) sends the user back to the login page.
 */
const sessionFetch: typeof fetch = async (input, init) => {
  const headers = new Headers(init?.headers);
  if (session.csrfToken) headers.set('x-csrf-token', session.csrfToken);
  const response = await fetch(input, { ...init, headers, credentials: 'same-origin' });
  if (response.status === 401) session.expire();
  return response;
};

let wsClient: Client | null = null;

function createWsClient(): Client {
  const url = new URL('/graphql', window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return createClient({
    url: url.toString(),
    lazy: true,
    // The cookie goes with the upgrade request; a server restart or a network blip reconnects.
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: () => session.user !== null,
    keepAlive: 20_000,
  });
}

const wsLink = new ApolloLink((operation) => {
  wsClient ??= createWsClient();
  return new GraphQLWsLink(wsClient).request(operation);
});

const httpLink = new HttpLink({ uri: '/graphql', fetch: sessionFetch });

export const apollo = new ApolloClient({
  link: ApolloLink.split(({ query }) => isSubscriptionOperation(query), wsLink, httpLink),
  cache: new InMemoryCache({
    typePolicies: {
      // Summaries and allocation have no id: one object per account, replaced as a whole.
      FleetSummary: { keyFields: [] },
      Allocation: { keyFields: [] },
      Device: { keyFields: ['serial'] },
      DeviceConfiguration: { merge: true },
      DeploymentCounts: { merge: true },
    },
  }),
  defaultOptions: {
    watchQuery: { fetchPolicy: 'cache-and-network' },
  },
});

/** After logout or expiry: close live subscriptions and forget cached data of that user. */
export async function resetApollo(): Promise<void> {
  const ws = wsClient;
  wsClient = null;
  await ws?.dispose();
  await apollo.clearStore();
}

/** One message for the user out of whatever failed (GraphQL errors, HTTP status, network). */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (CombinedGraphQLErrors.is(error)) {
    const first = error.errors[0];
    const extensions = (first?.extensions ?? {}) as {
      code?: string;
      status?: number;
      errors?: { field: string; message: string }[];
    };
    const messages = error.errors.map((e) => e.message);
    return new ApiError(
      messages.join(' '),
      extensions.status ?? 200,
      extensions.code ?? 'graphql_error',
      extensions.errors ?? [],
    );
  }
  if (ServerError.is(error)) {
    let message = `The service answered ${error.statusCode}.`;
    let code = `http_${error.statusCode}`;
    try {
      const body = JSON.parse(error.bodyText) as { errors?: { message: string; extensions?: { code?: string } }[] };
      if (body.errors?.[0]) {
        message = body.errors.map((e) => e.message).join(' ');
        code = body.errors[0].extensions?.code ?? code;
      }
    } catch {
      // not JSON: keep the status message
    }
    return new ApiError(message, error.statusCode, code);
  }
  if (error instanceof Error && /fetch|network/i.test(error.message)) {
    return new ApiError('The service cannot be reached. Check your connection and try again.', 0, 'network_error');
  }
  return new ApiError(error instanceof Error ? error.message : 'Something went wrong.', 0, 'unknown');
}
