import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

/** POST /graphql with JSON; returns status, headers and the parsed body. */
export async function gql(
  baseUrl: string,
  query: string,
  options: {
    variables?: Record<string, unknown>;
    apiKey?: string;
    cookie?: string;
    csrf?: string;
    headers?: Record<string, string>;
  } = {},
  // Test bodies are asserted field by field; `any` keeps those assertions short.
): Promise<{ status: number; headers: Headers; body: any }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  if (options.cookie) headers.cookie = options.cookie;
  if (options.csrf) headers['x-csrf-token'] = options.csrf;
  const res = await fetch(`${baseUrl}/graphql`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ query, variables: options.variables ?? {} }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

/** Logs in through REST and returns the cookie header and CSRF token. */
export async function login(
  baseUrl: string,
  email: string,
  password: string,
): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${baseUrl}/api/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (res.status !== 201) throw new Error(`login failed: ${res.status}`);
  const setCookie = res.headers.get('set-cookie') ?? '';
  const body = (await res.json()) as { csrf_token: string };
  return { cookie: setCookie.split(';')[0]!, csrf: body.csrf_token };
}

export function wsClient(
  baseUrl: string,
  options: {
    apiKey?: string;
    cookie?: string;
    origin?: string;
    /** CA to trust for wss:// (PEM). */ ca?: string | Buffer;
  } = {},
): Client {
  const url = baseUrl.replace(/^http/, 'ws') + '/graphql';
  const headers: Record<string, string> = {};
  if (options.cookie) headers.cookie = options.cookie;
  if (options.origin) headers.origin = options.origin;
  class HeaderWebSocket extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers, ...(options.ca !== undefined ? { ca: options.ca } : {}) });
    }
  }
  return createClient({
    url,
    webSocketImpl: HeaderWebSocket,
    lazy: false,
    // Refusals are asserted through the subscription's error callback instead of console noise.
    onNonLazyError: () => undefined,
    retryAttempts: 0,
    connectionParams: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
  });
}

/** What `collect` has gathered so far, and a way to wait for more. */
export interface Collected<T> {
  readonly items: T[];
  readonly errors: unknown[];
  readonly done: boolean;
  dispose(): void;
  until(predicate: () => boolean, timeoutMs?: number): Promise<void>;
}

/** Collects the results of one subscription; `until(predicate)` waits for the items a test needs. */
export function collect<T = unknown>(
  client: Client,
  query: string,
  variables: Record<string, unknown> = {},
): Collected<T> {
  const items: T[] = [];
  const errors: unknown[] = [];
  let done = false;
  let waiters: Array<() => void> = [];
  const wake = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const dispose = client.subscribe<T>(
    { query, variables },
    {
      next: (value) => {
        items.push(value as T);
        wake();
      },
      error: (error) => {
        // CloseEvents and Errors do not serialize: keep what a test asserts on.
        const e = error as { code?: number; reason?: string; message?: string };
        errors.push(Array.isArray(error) ? error : { code: e.code, reason: e.reason, message: e.message });
        done = true;
        wake();
      },
      complete: () => {
        done = true;
        wake();
      },
    },
  );
  return {
    items,
    errors,
    get done() {
      return done;
    },
    dispose,
    /** Resolves when at least n items arrived (or the stream ended), rejects after timeoutMs. */
    async until(predicate: () => boolean, timeoutMs = 5000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        if (done && !predicate()) throw new Error(`subscription ended: ${JSON.stringify(errors)}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timed out; got ${JSON.stringify(items)}`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
    },
  };
}
