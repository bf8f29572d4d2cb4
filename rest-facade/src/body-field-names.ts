import { ZodError } from 'zod';
import { DomainError } from '#core/shared/errors';
import { zodToFieldErrors } from '#edge/problem';

/**
 * A field of a domain input (camelCase, `eventTypes`, `filter.firmwareLt`) by the name the REST
 * body gives it (snake_case, `event_types`, `filter.firmware_lt`), segment by segment.
 */
export const bodyFieldName = (domainField: string): string =>
  domainField.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Runs domain work for a handler whose body it translated into a domain input, so that the field
 * errors of the answer name the body's fields, not the domain's: a DomainError's field errors
 * are renamed, and a ZodError of the service's own input check becomes the same 422
 * `validation_failed` problem with renamed fields. Anything else passes through unchanged.
 */
export async function withBodyFieldNames<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ZodError) {
      throw new DomainError('validation_failed', 'The request has invalid fields.', {
        errors: zodToFieldErrors(err).map((e) => ({ ...e, field: bodyFieldName(e.field) })),
      });
    }
    if (!(err instanceof DomainError) || !err.errors) throw err;
    throw new DomainError(err.code, err.message, {
      errors: err.errors.map((e) => ({ ...e, field: bodyFieldName(e.field) })),
      ...(err.details !== undefined ? { details: err.details } : {}),
      ...(err.retryAfterSeconds !== undefined ? { retryAfterSeconds: err.retryAfterSeconds } : {}),
    });
  }
}
