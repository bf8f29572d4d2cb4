import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Paths that may carry secrets: never written to a log line. */
const REDACT = [
  'password',
  '*.password',
  'secret',
  '*.secret',
  'api_key',
  '*.api_key',
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.cookie',
];

/**
 * The service's logger. `destination`: where lines go (default stdout); tests pass a stream to
 * read what was logged (test/integration/credential-rotation.test.ts checks no secret is).
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, redact: { paths: REDACT, censor: '[redacted]' }, base: { service: 'fleet' } };
  return destination ? pino(options, destination) : pino(options);
}
