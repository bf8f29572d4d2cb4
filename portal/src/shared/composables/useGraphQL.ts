import { isRef, onScopeDispose, ref, shallowRef, watch, type Ref, type WatchSource } from 'vue';
import type { OperationVariables, TypedDocumentNode, WatchQueryFetchPolicy } from '@apollo/client';
import { apollo, toApiError } from '../api/apollo';
import type { ApiError } from '../api/rest';

/**
 * Apollo Client 4 for Vue in a few lines (@vue/apollo-composable only supports Apollo 3). Every
 * document is a generated TypedDocumentNode (shared/graphql/generated/operations.ts): results and
 * variables are typed from the schema, never written out by hand.
 */

/** Variables given as they are, as a ref or as a getter (which re-runs the operation when they change). */
type VariablesSource<V> = WatchSource<V> | V;

function watchSourceOf<V>(variables: VariablesSource<V>): WatchSource<V> {
  // typeof and isRef do not narrow a type parameter: V itself could be a function or a ref.
  if (typeof variables === 'function' || isRef(variables)) return variables as WatchSource<V>;
  return () => variables;
}

/**
 * A watched query whose variables follow a reactive source; cache updates (mutations,
 * subscriptions writing normalised objects) flow into `data` by themselves.
 */
export function useQuery<T, V extends OperationVariables>(
  query: TypedDocumentNode<T, V>,
  variables: VariablesSource<V>,
  options: { fetchPolicy?: WatchQueryFetchPolicy; enabled?: WatchSource<boolean> } = {},
): { data: Ref<T | undefined>; loading: Ref<boolean>; error: Ref<ApiError | null>; refetch: () => Promise<void> } {
  const data = shallowRef<T>();
  const loading = ref(true);
  const error = shallowRef<ApiError | null>(null);
  let stop: (() => void) | null = null;
  let current: { refetch: () => Promise<unknown> } | null = null;

  const start = (vars: V) => {
    stop?.();
    loading.value = true;
    const observable = apollo.watchQuery({
      query,
      variables: vars,
      fetchPolicy: options.fetchPolicy ?? 'cache-and-network',
      notifyOnNetworkStatusChange: false,
    });
    current = observable;
    const subscription = observable.subscribe({
      next: (result) => {
        if (result.dataState === 'complete') data.value = result.data;
        error.value = result.error ? toApiError(result.error) : null;
        loading.value = result.loading;
      },
      error: (e: unknown) => {
        error.value = toApiError(e);
        loading.value = false;
      },
    });
    stop = () => {
      subscription.unsubscribe();
    };
  };

  watch(
    [watchSourceOf(variables), options.enabled ?? (() => true)] as const,
    ([vars, on]) => {
      if (on) start(vars);
      else {
        stop?.();
        loading.value = false;
      }
    },
    { immediate: true, deep: true },
  );
  onScopeDispose(() => stop?.());

  return {
    data,
    loading,
    error,
    refetch: async () => {
      try {
        await current?.refetch();
      } catch (e) {
        error.value = toApiError(e);
      }
    },
  };
}

/**
 * A live subscription (graphql-ws) for as long as the component lives; restarts when the
 * variables change. Normalised results (Device, Deployment) also update the cache.
 */
export function useSubscription<T, V extends OperationVariables>(
  query: TypedDocumentNode<T, V>,
  variables: VariablesSource<V>,
  onData: (data: T) => void,
  options: { enabled?: WatchSource<boolean> } = {},
): void {
  let stop: (() => void) | null = null;
  watch(
    [watchSourceOf(variables), options.enabled ?? (() => true)] as const,
    ([vars, on]) => {
      stop?.();
      stop = null;
      if (!on) return;
      const subscription = apollo.subscribe({ query, variables: vars }).subscribe({
        next: (result) => {
          if (result.data) onData(result.data);
        },
        // A dropped socket is retried by graphql-ws; a refused subscription just stays quiet.
        error: () => undefined,
      });
      stop = () => {
        subscription.unsubscribe();
      };
    },
    { immediate: true, deep: true },
  );
  onScopeDispose(() => stop?.());
}

/** Runs a mutation; throws an ApiError with the API's message (and field errors) on failure. */
export async function mutate<T, V extends OperationVariables>(
  mutation: TypedDocumentNode<T, V>,
  variables: V,
): Promise<T> {
  let result;
  try {
    result = await apollo.mutate({ mutation, variables });
  } catch (e) {
    throw toApiError(e);
  }
  if (result.error) throw toApiError(result.error);
  if (result.data === undefined) throw toApiError(new Error('The service answered without data.'));
  return result.data;
}

/** A one-off query straight from the network (paging, dry runs). */
export async function fetchQuery<T, V extends OperationVariables>(
  query: TypedDocumentNode<T, V>,
  variables: V,
): Promise<T> {
  let result;
  try {
    result = await apollo.query({ query, variables, fetchPolicy: 'no-cache' });
  } catch (e) {
    throw toApiError(e);
  }
  if (result.error) throw toApiError(result.error);
  if (result.data === undefined) throw toApiError(new Error('The service answered without data.'));
  return result.data;
}
