import express, { type Request, type Response, type Router } from 'express';
import DataLoader from 'dataloader';
import type { Knex } from 'knex';
import { pipeline } from 'node:stream/promises';
import type { Clock } from '../domain/shared/clock';
import { isUuid } from '../domain/shared/ids';
import type { DownloadLinkSigner } from '../domain/firmware/download-links';
import type { FirmwareStorage } from '../domain/firmware/firmware-storage';
import type { Logger } from '../logger';
import { problem, sendProblem } from '../../../rest-facade/src/problem';

/**
 * GET/HEAD /firmware/download/:jobId?e=&s= (docs/ota.md "Downloads"): the device-facing
 * download, outside /api/v1 (no API key: the signed link is the credential). Answers:
 * 200 or 206 (one byte range) streamed from disk with Content-Length, a strong ETag (the
 * sha256) and Accept-Ranges; 416 for an unsatisfiable range; 403 for a tampered or foreign
 * link; 410 when the link expired, the job is finished or the file was deleted; 404 for an
 * unknown job. A multi-range request gets the whole file (RFC 9110 lets a server ignore Range).
 */
export function firmwareDownloadRouter(deps: { knex: Knex; clock: Clock; links: DownloadLinkSigner; storage: FirmwareStorage; logger: Logger; onBytes?: (n: number) => void }): Router {
  const router = express.Router();
  // A deployment's devices all ask at once: the jobs of the requests that arrive within 2 ms
  // are read in one statement (10,000 downloads were 10,000 queries queued for the 10-connection
  // pool, starving the OTA dispatcher's transactions). Not cached: each request sees the job's
  // current state.
  const jobs = new DataLoader<string, JobRow | undefined>(
    async (ids) => {
      const rows = (await deps.knex('device_updates as u')
        .join('firmware_versions as f', 'f.id', 'u.firmware_version_id')
        .whereIn('u.id', ids as string[])
        .select('u.id', 'u.device_id', 'u.firmware_version_id', 'u.state', 'f.sha256', 'f.size', 'f.storage_key', 'f.version')) as Array<JobRow & { id: string }>;
      const byId = new Map(rows.map((r) => [r.id, r]));
      return ids.map((id) => byId.get(id));
    },
    { cache: false, maxBatchSize: 500, batchScheduleFn: (run) => setTimeout(run, 2) },
  );
  const handler = async (req: Request, res: Response) => {
    try {
      const jobId = String(req.params.jobId ?? '');
      const expires = Number(typeof req.query.e === 'string' ? req.query.e : NaN);
      const sig = typeof req.query.s === 'string' ? req.query.s : '';
      if (!isUuid(jobId) || !Number.isInteger(expires) || sig.length === 0 || sig.length > 100) {
        return sendProblem(res, problem('forbidden', 'This download link is not valid.'));
      }
      const row = await jobs.load(jobId);
      // Unknown jobs and bad signatures answer alike, so a link reveals nothing about other jobs.
      if (!row || !deps.links.verify({ jobId, deviceId: row.device_id, firmwareVersionId: row.firmware_version_id, expiresAt: expires }, sig)) {
        return sendProblem(res, problem('forbidden', 'This download link is not valid for this job.'));
      }
      if (expires * 1000 < deps.clock.now().getTime()) return sendProblem(res, gone('This download link expired; the device gets a fresh one when the command is re-sent.'));
      if (!['sent', 'downloading', 'installing', 'rebooting'].includes(row.state)) return sendProblem(res, gone(`The update is ${row.state}; nothing to download.`));
      if (!row.storage_key) return sendProblem(res, gone(`The binary of firmware ${row.version} was deleted.`));
      const size = Number(row.size);
      const etag = `"sha256-${row.sha256}"`;
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
          return sendProblem(res, { ...problem('range_not_satisfiable', `The range is outside the file of ${size} bytes.`), title: 'Range Not Satisfiable' });
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
      const inMemory = deps.storage.inMemory(row.storage_key, size, range ?? undefined);
      if (inMemory) {
        const body = await inMemory;
        deps.onBytes?.(body.length);
        return res.end(body);
      }
      const stream = deps.storage.open(row.storage_key, range ?? undefined);
      stream.on('data', (chunk: string | Buffer) => deps.onBytes?.(chunk.length));
      await pipeline(stream, res).catch((err: NodeJS.ErrnoException) => {
        // A device that hangs up mid-download is normal (it resumes with Range).
        if (err.code !== 'ERR_STREAM_PREMATURE_CLOSE') deps.logger.warn({ err, jobId }, 'firmware download failed');
        res.destroy();
      });
    } catch (err) {
      deps.logger.error({ err }, 'firmware download failed');
      sendProblem(res, problem('internal_error', 'An unexpected error occurred.'));
    }
  };
  router.get('/firmware/download/:jobId', handler);
  router.head('/firmware/download/:jobId', handler);
  return router;
}

interface JobRow {
  device_id: string;
  firmware_version_id: string;
  state: string;
  sha256: string;
  size: number | string;
  storage_key: string | null;
  version: string;
}

function gone(detail: string) {
  return { ...problem('gone', detail), title: 'Gone' };
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
