/**
 * The one list of error codes. Services throw `DomainError`s with these codes; each adapter maps
 * them in exactly one place (HTTP: api/src/edge/problem.ts, GraphQL: api/src/graphql/errors.ts,
 * MQTT: dropped and counted). Codes are part of the public contract: never rename one.
 */
export const ERROR_CODES = {
  validation_failed: 422,
  unknown_model: 422,
  invalid_serial: 422,
  invalid_version: 422,
  claim_rejected: 422,
  quota_exceeded: 422,
  budget_exceeded: 422,
  version_not_found: 422,
  firmware_file_missing: 422,
  /** A firmware signing key that is not a PEM SPKI Ed25519 public key (or is a private key). */
  invalid_signing_key: 422,
  /** A firmware upload whose signature is missing, malformed or does not verify with the account's key. */
  signature_invalid: 422,
  /**
   * A deploy, rollback, retry or claim that would send an unsigned firmware version while the
   * account has a signing key (devices that check signatures would refuse it); attach one first.
   */
  firmware_unsigned: 422,
  /** A certificate signing request that is unreadable, not self-signed, or of a key type not taken. */
  csr_invalid: 422,
  /** A firmware download link that expired, or whose job finished or file was deleted. */
  gone: 410,
  range_not_satisfiable: 416,
  not_found: 404,
  unauthenticated: 401,
  invalid_credentials: 401,
  forbidden: 403,
  csrf_failed: 403,
  conflict: 409,
  already_exists: 409,
  invalid_state: 409,
  idempotency_key_in_use: 409,
  idempotency_key_reused: 422,
  malformed_json: 400,
  /** Undecodable request line or headers (bad percent-encoding in the path, a cookie, ...). */
  malformed_request: 400,
  bad_request: 400,
  /** GraphQL: depth, cost, alias, token or directive limit exceeded (refused before execution). */
  query_too_complex: 400,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  too_many_login_attempts: 429,
  service_unavailable: 503,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface FieldError {
  /** Dotted path of the offending field, e.g. `config.dim_level` or `serials.3`. */
  field: string;
  message: string;
}

export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly errors: FieldError[] | undefined;
  /** Extra machine-readable detail (e.g. offending serials), included in the problem body. */
  readonly details: Record<string, unknown> | undefined;
  /** Seconds the client should wait (429, 503). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    extra: { errors?: FieldError[]; details?: Record<string, unknown>; retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.errors = extra.errors;
    this.details = extra.details;
    this.retryAfterSeconds = extra.retryAfterSeconds;
  }
}

export const notFound = (what: string): DomainError => new DomainError('not_found', `${what} not found`);

export function assertNever(value: never, context = 'value'): never {
  throw new Error(`Unexpected ${context}: ${JSON.stringify(value)}`);
}
