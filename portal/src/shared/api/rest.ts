import { session } from '../session';

/** A failed API call as the user should see it: the problem's detail plus per-field messages. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly fieldErrors: { field: string; message: string }[] = [],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

interface Problem {
  title?: string;
  detail?: string;
  code?: string;
  errors?: { field: string; message: string }[];
}

/** Turns an RFC 9457 problem body (or anything else) into an ApiError. */
export async function problemToError(response: Response): Promise<ApiError> {
  let body: Problem = {};
  try {
    body = (await response.json()) as Problem;
  } catch {
    // Not JSON (a proxy's HTML page, an empty body): fall back to the status line.
  }
  const message = body.detail ?? body.title ?? `Request failed (${response.status} ${response.statusText})`;
  return new ApiError(message, response.status, body.code ?? `http_${response.status}`, body.errors ?? []);
}

/**
 * JSON call to the REST API with the session cookie; writes carry the CSRF token.
 * A 401 on anything but the session endpoint means the session expired.
 */
export async function rest<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && session.csrfToken) headers['x-csrf-token'] = session.csrfToken;
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiError('The service cannot be reached. Check your connection and try again.', 0, 'network_error');
  }
  if (response.status === 401 && path !== '/api/v1/session') session.expire();
  if (!response.ok) throw await problemToError(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}
