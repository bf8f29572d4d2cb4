import { onScopeDispose, ref, shallowRef, watch, type Ref, type WatchSource } from 'vue';
import type { DocumentNode } from 'graphql';
import type { OperationVariables, WatchQueryFetchPolicy } from '@apollo/client';
import { apollo, toApiError } from '../api/apollo';
import type { ApiError } from '../api/rest';

/**
 * Apollo Client 4 for Vue in a few lines (@vue/apollo-composable only supports Apollo 3):
 * a watched query whose variables follow a reactive source; cache updates (mutations,
 * subscriptions writing normalised objects) flow into `data` by themselves.
 */
export function useQuery<T, V extends OperationVariables = OperationVariables>(
  query: DocumentNode,
  variables: WatchSource<V> | V = {} as V,
  options: { fetchPolicy?: WatchQueryFetchPolicy; enabled?: WatchSource<boolean> } = {},
): { data: Ref<T | undefined>; loading: Ref<boolean>; error: Ref<ApiError | null>; refetch: () => Promise<void> } {
  const data = shallowRef<T>();
  const loading = ref(true);
  const error = shallowRef<ApiError | null>(null);
  let stop: (() => void) | null = null;
  let current: ReturnType<typeof apollo.watchQuery> | null = null;

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
        if (result.data !== undefined) data.value = result.data as T;
        error.value = result.error ? toApiError(result.error) : null;
        loading.value = result.loading;
      },
      error: (e: unknown) => {
        error.value = toApiError(e);
        loading.value = false;
      },
    });
    stop = () => subscription.unsubscribe();
  };

  const source =
    typeof variables === 'function' || (variables && typeof variables === 'object' && 'value' in variables)
      ? (variables as WatchSource<V>)
      : () => variables as V;
  const enabled = options.enabled ?? (() => true);
  watch(
    [source, enabled] as const,
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
export function useSubscription<T, V extends OperationVariables = OperationVariables>(
  query: DocumentNode,
  variables: WatchSource<V> | V,
  onData: (data: T) => void,
  options: { enabled?: WatchSource<boolean> } = {},
): void {
  let stop: (() => void) | null = null;
  const source = typeof variables === 'function' ? (variables as WatchSource<V>) : () => variables as V;
  watch(
    [source, options.enabled ?? (() => true)] as const,
    ([vars, on]) => {
      stop?.();
      stop = null;
      if (!on) return;
      const subscription = apollo.subscribe({ query, variables: vars }).subscribe({
        next: (result) => {
          if (result.data) onData(result.data as T);
        },
        // A dropped socket is retried by graphql-ws; a refused subscription just stays quiet.
        error: () => undefined,
      });
      stop = () => subscription.unsubscribe();
    },
    { immediate: true, deep: true },
  );
  onScopeDispose(() => stop?.());
}

/** Runs a mutation; throws an ApiError with the API's message (and field errors) on failure. */
export async function mutate<T, V extends OperationVariables = OperationVariables>(
  mutation: DocumentNode,
  variables: V,
): Promise<T> {
  try {
    const result = await apollo.mutate({ mutation, variables });
    if (result.error) throw result.error;
    return result.data as T;
  } catch (e) {
    throw toApiError(e);
  }
}

/** A one-off query straight from the network (paging, dry runs). */
export async function fetchQuery<T, V extends OperationVariables = OperationVariables>(
  query: DocumentNode,
  variables: V,
): Promise<T> {
  try {
    const result = await apollo.query({ query, variables, fetchPolicy: 'no-cache' });
    if (result.error) throw result.error;
    return result.data as T;
  } catch (e) {
    throw toApiError(e);
  }
}
