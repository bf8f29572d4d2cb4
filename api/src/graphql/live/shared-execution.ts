import { createSourceEventStream, execute, type DocumentNode, type ExecutionArgs, type ExecutionResult } from 'graphql';

type Result = ExecutionResult | Promise<ExecutionResult>;

/**
 * Subscription fan-out without executing the same selection once per subscriber. graphql-js
 * executes a subscription's selection for every event at every subscriber; here the result for
 * one event (a payload object the live views hand to every subscriber of an account) is
 * computed once per (document, variables, operation, account) and shared. 200 portals watching
 * one fleet then cost one execution per change instead of 200.
 *
 * Invariant this relies on (docs/graphql.md): what a subscription resolves depends only on the
 * payload, the variables and the subscriber's account, never on the individual caller (both
 * roles read the same data; no subscription field is role-dependent).
 */
export function sharedSubscribe(accountOf: (contextValue: unknown) => string) {
  const results = new WeakMap<object, Map<string, Result>>();
  const variableKeys = new WeakMap<object, string>();

  const keyOf = (args: ExecutionArgs): string => {
    const vars = args.variableValues ?? {};
    let varKey = variableKeys.get(vars);
    if (varKey === undefined) {
      varKey = JSON.stringify(vars);
      variableKeys.set(vars, varKey);
    }
    return `${documentId(args.document)}\u0000${args.operationName ?? ''}\u0000${varKey}\u0000${accountOf(args.contextValue)}`;
  };

  const executeShared = (args: ExecutionArgs, payload: unknown): Result => {
    if (typeof payload !== 'object' || payload === null) return execute({ ...args, rootValue: payload });
    let byKey = results.get(payload);
    if (!byKey) {
      byKey = new Map();
      results.set(payload, byKey);
    }
    const key = keyOf(args);
    let result = byKey.get(key);
    if (!result) {
      result = execute({ ...args, rootValue: payload });
      byKey.set(key, result);
    }
    return result;
  };

  return async (args: ExecutionArgs): Promise<AsyncGenerator<ExecutionResult> | ExecutionResult> => {
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) return source;
    const iterator = source[Symbol.asyncIterator]();
    return {
      async next() {
        const step = await iterator.next();
        if (step.done) return { done: true, value: undefined };
        return { done: false, value: await executeShared(args, step.value) };
      },
      async return() {
        await iterator.return?.();
        return { done: true, value: undefined };
      },
      async throw(error: unknown) {
        await iterator.return?.();
        throw error;
      },
      [Symbol.asyncIterator]() {
        return this;
      },
      // graphql-ws only iterates; the generator type is what its `subscribe` option expects.
    } as AsyncGenerator<ExecutionResult>;
  };
}

/** Stable ids for parsed documents (the WebSocket layer caches one DocumentNode per query text). */
const documentIds = new WeakMap<DocumentNode, number>();
let nextDocumentId = 1;
function documentId(document: DocumentNode): number {
  let id = documentIds.get(document);
  if (id === undefined) {
    id = nextDocumentId++;
    documentIds.set(document, id);
  }
  return id;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}
