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
