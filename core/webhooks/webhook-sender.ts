import http from 'node:http';
import https from 'node:https';
import { checkWebhookUrl, DESTINATION_NOT_ALLOWED, guardedLookup } from './url-guard';

export interface SendResult {
  /** HTTP status, or null when no response came (timeout, refused, DNS, SSRF guard). */
  statusCode: number | null;
  durationMs: number;
  /** Why it failed; null on 2xx. */
  error: string | null;
}

export interface WebhookRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

export type WebhookSender = (request: WebhookRequest) => Promise<SendResult>;

/** Bytes of a receiver's response body that are read (and discarded). */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * POSTs one delivery. The whole exchange (connect, send, response) is bounded by `timeoutMs`
 * so a hanging receiver cannot hold a worker slot; redirects are not followed (a 3xx is a
 * failure: following one would bypass the SSRF guard); the guard checks the resolved address
 * of every connection.
 */
export function createHttpSender(options: { timeoutMs: number; allowPrivate: boolean }): WebhookSender {
  const lookup = guardedLookup(options.allowPrivate);
  return (request) =>
    new Promise<SendResult>((resolve) => {
      const started = performance.now();
      const done = (statusCode: number | null, error: string | null) => {
        clearTimeout(timer);
        resolve({ statusCode, durationMs: Math.round(performance.now() - started), error });
      };
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        resolve({ statusCode: null, durationMs: 0, error: 'invalid URL' });
        return;
      }
      // The creation check again (literal addresses, local names): rows stored before a
      // stricter guard, or written around the service, are refused here too.
      if (checkWebhookUrl(request.url, options.allowPrivate) !== null) {
        resolve({ statusCode: null, durationMs: 0, error: DESTINATION_NOT_ALLOWED });
        return;
      }
      const transport = url.protocol === 'https:' ? https : http;
      const req = transport.request(url, {
        method: 'POST',
        headers: { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) },
        lookup,
        agent: false,
      });
      const timer = setTimeout(() => {
        req.destroy(Object.assign(new Error(`timed out after ${options.timeoutMs} ms`), { code: TIMED_OUT }));
      }, options.timeoutMs);
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) res.destroy();
        });
        const finish = () => {
          if (status >= 200 && status < 300) done(status, null);
          else if (status >= 300 && status < 400) done(status, `redirect refused (${status})`);
          else done(status, `HTTP ${status}`);
        };
        res.on('end', finish);
        res.on('close', finish);
        res.on('error', () => finish());
      });
      req.on('error', (error: NodeJS.ErrnoException) => done(null, describeFailure(error)));
      req.end(request.body);
    });
}

const TIMED_OUT = 'ERR_WEBHOOK_TIMEOUT';

const FAILURES: Record<string, string> = {
  ERR_WEBHOOK_PRIVATE_ADDRESS: DESTINATION_NOT_ALLOWED,
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  EAI_NODATA: 'host not found',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'host unreachable',
  ETIMEDOUT: 'connection timed out',
};

/**
 * What the delivery log records for a failed connection: the account reads it, so it says how
 * the attempt failed and never where (Node's messages quote the resolved address and port,
 * certificate errors the address too, which would map the operator's network).
 */
function describeFailure(error: NodeJS.ErrnoException): string {
  const code = error.code ?? '';
  if (code === TIMED_OUT) return error.message;
  const known = FAILURES[code];
  if (known) return known;
  if (/^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|HOSTNAME_MISMATCH|ERR_OSSL)/.test(code))
    return `TLS error (${code})`;
  return /^[A-Z0-9_]{1,40}$/.test(code) ? `connection failed (${code})` : 'connection failed';
}
