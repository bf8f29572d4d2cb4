import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import { unwrapResolverError } from '@apollo/server/errors';
import { ZodError } from 'zod';
import { DomainError, ERROR_CODES, type ErrorCode, type FieldError } from '#core/shared/errors';
import type { Logger } from '#core/logger';
import { isDatabaseDown, isRefusedInput } from '../edge/problem';

/**
 * The one place where errors become GraphQL errors. Domain codes pass through unchanged as
 * `extensions.code` (the same strings as the REST problem `code`), with the HTTP-equivalent
 * `status`, the field `errors` and any extra `details`. Anything unexpected is logged and
 * answered as `internal_error` without detail.
 */

/**
 * Limits of graphql-armor (depth, aliases, directives) and the parser's token limit report these
 * messages; they become `query_too_complex`. The cost limit answers with that code itself (limits.ts).
 */
const LIMIT_MESSAGE =
  /(Query depth limit|Aliases limit|Token limit|Directives limit|Document contains more th\w+ \d+ tokens)/i;

export function domainExtensions(error: DomainError): Record<string, unknown> {
  return {
    ...(error.details ?? {}),
    code: error.code,
    status: ERROR_CODES[error.code],
    ...(error.errors ? { errors: error.errors } : {}),
    ...(error.retryAfterSeconds !== undefined ? { retryAfter: error.retryAfterSeconds } : {}),
  };
}

/** camelCase GraphQL input paths for zod issues: `input.serials.3`. */
function zodFieldErrors(error: ZodError): FieldError[] {
  return error.issues.map((issue) => ({
    field: issue.path.map(String).join('.') || '(input)',
    message: issue.message,
  }));
}

/** A GraphQLError for a domain code, for adapters that must throw one (context, plugins). */
export function graphQLErrorFor(
  code: ErrorCode,
  message: string,
  extra: { http?: { status?: number; headers?: Map<string, string> } } = {},
): GraphQLError {
  const status = ERROR_CODES[code];
  return new GraphQLError(message, {
    extensions: {
      code,
      status,
      http: { status: extra.http?.status ?? status, ...(extra.http?.headers ? { headers: extra.http.headers } : {}) },
    },
  });
}

/** A GraphQLError carrying a domain error's extensions (field errors included) and HTTP status. */
export function graphQLErrorForDomain(error: DomainError): GraphQLError {
  const status = ERROR_CODES[error.code];
  return new GraphQLError(error.message, { extensions: { ...domainExtensions(error), http: { status } } });
}

export function formatGraphQLError(logger: Logger) {
  return (formatted: GraphQLFormattedError, raw: unknown): GraphQLFormattedError => {
    const original = unwrapResolverError(raw);
    const base = {
      message: formatted.message,
      ...(formatted.locations ? { locations: formatted.locations } : {}),
      ...(formatted.path ? { path: formatted.path } : {}),
    };
    if (original instanceof DomainError)
      return { ...base, message: original.message, extensions: domainExtensions(original) };
    if (original instanceof ZodError) {
      return {
        ...base,
        message: 'The input has invalid fields.',
        extensions: { code: 'validation_failed', status: 422, errors: zodFieldErrors(original) },
      };
    }
    const code = formatted.extensions?.code;
    if (typeof code === 'string' && code !== 'INTERNAL_SERVER_ERROR') {
      if (
        (code === 'GRAPHQL_VALIDATION_FAILED' || code === 'GRAPHQL_PARSE_FAILED') &&
        LIMIT_MESSAGE.test(formatted.message)
      ) {
        return { ...base, extensions: { code: 'query_too_complex', status: 400 } };
      }
      // Our own codes (context, plugins) and Apollo's parse/validation codes pass through; the
      // internal `http` hint is not part of the answer.
      const { http: _http, stacktrace: _stack, ...extensions } = formatted.extensions ?? {};
      return { ...base, extensions };
    }
    if (isRefusedInput(original)) {
      return {
        ...base,
        message: 'A value in the input is not acceptable.',
        extensions: { code: 'validation_failed', status: 422 },
      };
    }
    if (isDatabaseDown(original)) {
      return {
        ...base,
        message: 'The database is unavailable; try again shortly.',
        extensions: { code: 'service_unavailable', status: 503 },
      };
    }
    logger.error({ err: original }, 'graphql operation failed');
    return { ...base, message: 'An unexpected error occurred.', extensions: { code: 'internal_error', status: 500 } };
  };
}
