import type { Request, Response, NextFunction } from 'express';
import { DomainError, ERROR_CODES, type ErrorCode } from '#core/shared/errors';
import { ZodError } from 'zod';
import type { Logger } from '#core/logger';

/**
 * RFC 9457 problem details, with our stable `code` and field `errors`: what every HTTP answer
 * that is an error looks like (REST, firmware downloads, /metrics, the app's last handler).
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  errors?: { field: string; message: string }[];
  [extra: string]: unknown;
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  410: 'Gone',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  416: 'Range Not Satisfiable',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export const PROBLEM_TYPE_BASE = 'https://fleet.example/problems/';

export function zodToFieldErrors(error: ZodError, prefix = ''): { field: string; message: string }[] {
  return error.issues.map((issue) => ({
    field: [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || '(body)',
    message: issue.message,
  }));
}

/** The one place where domain errors become HTTP. */
export function toProblem(error: unknown): Problem {
  if (error instanceof ZodError) {
    return {
      type: PROBLEM_TYPE_BASE + 'validation_failed',
      title: TITLES[422]!,
      status: 422,
      detail: 'The request has invalid fields.',
      code: 'validation_failed',
      errors: zodToFieldErrors(error),
    };
  }
  if (error instanceof DomainError) {
    const status = ERROR_CODES[error.code];
    return {
      // Details first: a detail named like a problem member (e.g. a deployment's `status`)
      // must never replace the HTTP status or the code.
      ...(error.details ?? {}),
      type: PROBLEM_TYPE_BASE + error.code,
      title: TITLES[status] ?? 'Error',
      status,
      detail: error.message,
      code: error.code,
      ...(error.errors ? { errors: error.errors } : {}),
    };
  }
  // Safety net: input PostgreSQL refuses as data (bad encoding, out of range, too long) is the
  // caller's error, not ours; validation should have caught it first.
  if (isRefusedInput(error)) return problem('validation_failed', 'A value in the request is not acceptable.');
  return {
    type: PROBLEM_TYPE_BASE + 'internal_error',
    title: TITLES[500]!,
    status: 500,
    detail: 'An unexpected error occurred.',
    code: 'internal_error',
  };
}

export function sendProblem(res: Response, problem: Problem, retryAfterSeconds?: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfterSeconds))));
  res.status(problem.status).type('application/problem+json').send(JSON.stringify(problem));
}

/**
 * Errors Express, its router or a body parser raise before a route runs: the caller's fault,
 * answered with a fixed detail (their messages quote the raw input). Null for anything else.
 */
export function frameworkProblem(error: unknown): Problem | null {
  if (!error || typeof error !== 'object' || error instanceof DomainError) return null;
  // decodeURIComponent of a path segment (Express decodes route params) or of a header value.
  if (error instanceof URIError)
    return problem('malformed_request', 'The request URL or a header is not valid percent-encoding.');
  const e = error as { type?: unknown; status?: unknown; statusCode?: unknown };
  if (e.type === 'entity.parse.failed') return problem('malformed_json', 'The body is not valid JSON.');
  if (e.type === 'entity.too.large')
    return problem('payload_too_large', 'The body is larger than the documented limit.');
  if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported')
    return problem('unsupported_media_type', 'Unsupported body encoding or charset.');
  // Other http-errors the framework raises (a 400 from an aborted or unreadable body, ...).
  const status = typeof e.status === 'number' ? e.status : e.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 413) return problem('payload_too_large', 'The body is larger than the documented limit.');
    if (status === 415) return problem('unsupported_media_type', 'Unsupported body encoding or charset.');
    return problem('malformed_request', 'The request could not be read.');
  }
  return null;
}

/**
 * Express error middleware: framework errors, domain errors and the unexpected. Mounted in the
 * REST router and as the app's last handler, so no error ever reaches Express's default
 * handler (an HTML page with the stack trace unless NODE_ENV is production).
 */
export function problemErrorHandler(logger: Logger) {
  return (error: unknown, _req: Request, res: Response, _next: NextFunction): void => {
    const framework = frameworkProblem(error);
    if (framework) {
      sendProblem(res, framework);
      return;
    }
    const p = toProblem(error);
    if (p.status >= 500) {
      if (isDatabaseDown(error)) {
        sendProblem(res, problem('service_unavailable', 'The database is unavailable; try again shortly.'), 5);
        return;
      }
      logger.error({ err: error }, 'request failed');
    }
    sendProblem(res, p, error instanceof DomainError ? error.retryAfterSeconds : undefined);
  };
}

export function problem(code: ErrorCode, detail: string, extra: Partial<Problem> = {}): Problem {
  const status = ERROR_CODES[code];
  return { type: PROBLEM_TYPE_BASE + code, title: TITLES[status] ?? 'Error', status, detail, code, ...extra };
}

const PG_INPUT_ERRORS = new Set(['22P05', '22021', '22001', '22003', '22007', '22008', '22P02', '54001']);
/**
 * Input PostgreSQL refuses as data (bad encoding such as a lone UTF-16 surrogate, out of range,
 * too long): the caller's error, not ours, over REST and GraphQL alike; validation should have
 * caught it first.
 */
export function isRefusedInput(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && PG_INPUT_ERRORS.has(code);
}
const DB_DOWN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '57P03', '08006', '08001', '08003']);
/** A connection-level failure: the database is unreachable, not the request wrong (503, not 500). */
export function isDatabaseDown(error: unknown): boolean {
  const e = error as { code?: string; message?: string } | null;
  if (!e || typeof e !== 'object') return false;
  if (e.code && DB_DOWN_CODES.has(e.code)) return true;
  return typeof e.message === 'string' && /Timeout acquiring a connection|Connection terminated/.test(e.message);
}
