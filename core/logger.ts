import { pino, type Logger } from 'pino';

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

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACT, censor: '[redacted]' }, base: { service: 'fleet' } });
}
