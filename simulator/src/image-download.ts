import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { OtaCommand } from '#protocol/payloads';
import { pick, sleep } from './sim-helpers';

const DOWNLOAD_ERRORS = [
  'download failed: connection reset by peer (ECONNRESET)',
  'download failed: timed out waiting for data after 30 s',
];
const DOWNLOAD_ATTEMPTS = 6;
const IDLE_TIMEOUT_MS = 30_000;

export interface ImageDownloadOptions {
  /** Transfer speed; 0 = as fast as the server sends. */
  downloadKbps: number;
  /** Fail the transfer at 40 % (the simulator's injected failure). */
  failMidway: boolean;
  random: () => number;
  /** The device was stopped: no more resuming. */
  isStopped: () => boolean;
  trace: (message: string) => void;
  onProgress: (percent: number) => void;
  /** Receives the file's bytes too (a module that keeps its image to apply deltas to it later). */
  collect?: Buffer[] | undefined;
}

/** One GET of the image (or of its rest, with Range): the response, or an error that says why. */
function request(url: string, headers: Record<string, string>): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const get = url.startsWith('https:') ? https.get : http.get;
    // No keep-alive: a module downloads once per update (and the service closes the connection).
    const req = get(url, { headers, agent: false }, resolve);
    // Gives up on a transfer that sends nothing for 30 s (the socket's idle timer restarts with every chunk).
    req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new Error('timed out waiting for data after 30 s')));
    // A persistent listener: an error after the response arrived (the body broke off) must not go unhandled.
    req.on('error', reject);
  });
}

/**
 * Streams the image at the configured speed, hashing as it goes; returns the hex sha256.
 * Like module firmware on a weak network, a broken transfer (reset connection, a server
 * process gone, 5xx) is resumed with `Range` after a back-off, up to DOWNLOAD_ATTEMPTS times;
 * a 4xx (expired or foreign link) or an injected failure is final. Plain node:http, not fetch:
 * 10,000 devices downloading at once cost the simulator's process several times more CPU with
 * fetch's web streams than the service spent serving them (bench/ota.bench.ts).
 */
export async function downloadImage(
  command: Pick<OtaCommand, 'url' | 'size'>,
  options: ImageDownloadOptions,
): Promise<string> {
  const { onProgress, failMidway, random } = options;
  let hash = createHash('sha256');
  const bytesPerS = (options.downloadKbps * 1000) / 8;
  const started = Date.now();
  let received = 0;
  let lastReported = 0;
  let etag: string | null = null;
  for (let attempt = 1; ; attempt++) {
    let retryable = true;
    try {
      const headers: Record<string, string> =
        received > 0 && etag ? { range: `bytes=${received}-`, 'if-range': etag } : {};
      const res = await request(command.url, headers);
      const status = res.statusCode ?? 0;
      if (status >= 400 && status < 500) retryable = false;
      if (!(status === 200 || status === 206)) {
        res.resume();
        throw new Error(`HTTP ${status}`);
      }
      if (status === 200 && received > 0) {
        // The server sent the whole image again (the file changed or no range support): start over.
        hash = createHash('sha256');
        received = 0;
        options.collect?.splice(0);
      }
      etag = typeof res.headers.etag === 'string' ? res.headers.etag : null;
      for await (const chunk of res as AsyncIterable<Buffer>) {
        hash.update(chunk);
        options.collect?.push(chunk);
        received += chunk.length;
        const percent = command.size > 0 ? Math.min(100, Math.floor((received / command.size) * 100)) : 100;
        if (failMidway && percent >= 40) {
          res.destroy();
          retryable = false;
          throw new Error(`${pick(DOWNLOAD_ERRORS, random)} at ${percent}%`);
        }
        if (percent - lastReported >= 20 && percent < 100) {
          lastReported = percent;
          onProgress(percent);
        }
        if (bytesPerS > 0) {
          const due = (received / bytesPerS) * 1000 - (Date.now() - started);
          if (due > 0) await sleep(due);
        }
      }
      if (command.size && received < command.size)
        throw new Error(`connection closed at ${received} of ${command.size} bytes`);
      break;
    } catch (err) {
      const message = (err as Error).message.replace(/^download failed: /, '');
      if (!retryable || options.isStopped() || attempt >= DOWNLOAD_ATTEMPTS)
        throw new Error(`download failed: ${message}`, { cause: err });
      options.trace(`${message}; resuming at byte ${received} (attempt ${attempt + 1} of ${DOWNLOAD_ATTEMPTS})`);
      await sleep(Math.min(500 * 2 ** (attempt - 1), 8000) * (0.5 + random()));
    }
  }
  if (failMidway) throw new Error(`${pick(DOWNLOAD_ERRORS, random)} at 99%`);
  if (command.size && received !== command.size)
    throw new SizeMismatch(`size mismatch: got ${received} bytes, expected ${command.size}`);
  onProgress(100);
  return hash.digest('hex');
}

/** The image is not the size the command said (error_code `size_mismatch`, not `download`). */
export class SizeMismatch extends Error {}
