import { Agent, fetch as undiciFetch } from 'undici';

/** A small fetch wrapper for tests: JSON in, status + headers + parsed body out. */
// Test bodies are asserted field by field; `any` keeps those assertions short.
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export class ApiClient {
  /** For an HTTPS service with a private CA: Node's fetch takes no CA of its own. */
  private readonly agent: Agent | undefined;

  constructor(
    readonly baseUrl: string,
    readonly apiKey?: string,
    /** PEM of the CA that signed the service's certificate (HTTPS tests). */
    readonly ca?: string,
  ) {
    this.agent = ca ? new Agent({ connect: { ca } }) : undefined;
  }

  withKey(apiKey: string): ApiClient {
    return new ApiClient(this.baseUrl, apiKey, this.ca);
  }

  async request<T = any>(
    method: string,
    path: string,
    options: { body?: unknown; headers?: Record<string, string>; rawBody?: BodyInit } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...options.headers };
    if (this.apiKey && !('authorization' in headers)) headers.authorization = `Bearer ${this.apiKey}`;
    let body: BodyInit | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    // Paths are absolute on the server: '/api/v1/devices', '/healthz'.
    const init = { method, headers, ...(body !== undefined ? { body } : {}) };
    const res = this.agent
      ? ((await undiciFetch(this.baseUrl + path, { ...init, dispatcher: this.agent } as Parameters<
          typeof undiciFetch
        >[1])) as unknown as Response)
      : await fetch(this.baseUrl + path, init);
    const text = await res.text();
    let parsed: unknown = text;
    const type = res.headers.get('content-type') ?? '';
    if (type.includes('json') && text) parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed as T };
  }

  get<T = any>(path: string, headers?: Record<string, string>) {
    return this.request<T>('GET', path, headers ? { headers } : {});
  }
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', path, { body, ...(headers ? { headers } : {}) });
  }
  patch<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('PATCH', path, { body, ...(headers ? { headers } : {}) });
  }
  delete<T = any>(path: string, headers?: Record<string, string>) {
    return this.request<T>('DELETE', path, headers ? { headers } : {});
  }
}
