import express, { type Request, type Response, type Router } from 'express';
import { pipeline } from 'node:stream/promises';
import { DomainError } from '#core/shared/errors';
import type { FirmwareDownloads } from '#core/firmware/firmware-downloads';
import type { FirmwareStorage } from '#core/firmware/firmware-storage';
import type { Logger } from '#core/logger';
import { problem, sendProblem, toProblem } from '../edge/problem';

/**
 * GET/HEAD /firmware/download/:jobId?e=&s= (docs/ota.md "Downloads"): the device-facing
 * download, outside /api/v1 (no API key: the signed link is the credential, checked by
 * FirmwareDownloads). Answers: 200 or 206 (one byte range) with Content-Length, a strong ETag
 * (the sha256) and Accept-Ranges; 416 for an unsatisfiable range; 403 for a tampered or foreign
 * link or an unknown job; 410 when the link expired, the job is finished or the file was deleted.
 * A multi-range request gets the whole file (RFC 9110 lets a server ignore Range).
 */
export function firmwareDownloadRouter(deps: {
  downloads: FirmwareDownloads;
  storage: FirmwareStorage;
  logger: Logger;
  onBytes?: (n: number) => void;
}): Router {
  const router = express.Router();
  // The same answers for a delta (`.../delta`, docs/ota.md "Delta images") as for the full image.
  const handler = (what: 'image' | 'delta') => async (req: Request, res: Response) => {
    const jobId = String(req.params.jobId ?? '');
    try {
      const link = {
        jobId,
        expiresAt: Number(typeof req.query.e === 'string' ? req.query.e : NaN),
        signature: typeof req.query.s === 'string' ? req.query.s : '',
      };
      const grant = await (what === 'delta' ? deps.downloads.authorizeDelta(link) : deps.downloads.authorize(link));
      const { size, storageKey } = grant;
      const etag = `"sha256-${grant.sha256}"`;
      res.setHeader('ETag', etag);
      res.setHeader('Accept-Ranges', 'bytes');
      res.setHeader('Cache-Control', 'private, no-transform');
      res.setHeader('Content-Type', 'application/octet-stream');
      // A device downloads once per update: a kept-alive socket per device would only hold a file
      // descriptor. With 10,000 devices on MQTT and 10,000 idle download sockets the process
      // reached its limit of 20,000 and refused connections (bench/ota.bench.ts).
      res.setHeader('Connection', 'close');
      if (req.get('If-None-Match') === etag) return res.status(304).end();
      let range: { start: number; end: number } | null = null;
      const rangeHeader = req.get('Range');
      const ifRange = req.get('If-Range');
      if (rangeHeader && (!ifRange || ifRange === etag)) {
        const parsed = parseRange(rangeHeader, size);
        if (parsed === 'unsatisfiable') {
          res.setHeader('Content-Range', `bytes */${size}`);
          sendProblem(res, problem('range_not_satisfiable', `The range is outside the file of ${size} bytes.`));
          return;
        }
        range = parsed;
      }
      const length = range ? range.end - range.start + 1 : size;
      res.setHeader('Content-Length', String(length));
      if (range) {
        res.status(206);
        res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
      } else res.status(200);
      if (req.method === 'HEAD') return res.end();
      const inMemory = deps.storage.inMemory(storageKey, size, range ?? undefined);
      if (inMemory) {
        const body = await inMemory;
        deps.onBytes?.(body.length);
        return res.end(body);
      }
      const stream = deps.storage.open(storageKey, range ?? undefined);
      stream.on('data', (chunk: string | Buffer) => deps.onBytes?.(chunk.length));
      await pipeline(stream, res).catch((err: unknown) => {
        // A device that hangs up mid-download is normal (it resumes with Range).
        if ((err as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE')
          deps.logger.warn({ err, jobId }, 'firmware download failed');
        res.destroy();
      });
    } catch (err) {
      if (!(err instanceof DomainError)) deps.logger.error({ err, jobId }, 'firmware download failed');
      sendProblem(res, toProblem(err));
    }
  };
  router.get('/firmware/download/:jobId', handler('image'));
  router.head('/firmware/download/:jobId', handler('image'));
  router.get('/firmware/download/:jobId/delta', handler('delta'));
  router.head('/firmware/download/:jobId/delta', handler('delta'));
  return router;
}

/** One `bytes=` range (first-last, first-, -suffix); null means "serve the whole file". */
export function parseRange(header: string, size: number): { start: number; end: number } | null | 'unsatisfiable' {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return null;
  const [, a, b] = m;
  if (a === '' && b === '') return null;
  let start: number;
  let end: number;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(a);
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
    if (b !== '' && Number(b) < start) return null;
  }
  if (start >= size || size === 0) return 'unsatisfiable';
  return { start, end };
}
