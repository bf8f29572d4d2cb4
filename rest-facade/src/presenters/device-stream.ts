import { once } from 'node:events';
import type { Response } from 'express';
import type { DeviceJsonPage } from '#core/devices/device.service';

/**
 * The unpaged device list as one JSON document written batch by batch:
 * `{"devices":[...],"total":N,"quota":Q}`. Memory holds one batch; when the client reads slower
 * than we write, we wait for 'drain' (backpressure) instead of buffering the fleet. `total` is
 * the number of devices written. The first batch is read before the status line, so a database
 * error still becomes a proper problem response; a later one cuts the connection (the document
 * is then visibly incomplete, never silently short).
 */
export async function streamDeviceList(
  res: Response,
  input: { quota: number; batches: AsyncGenerator<string[]> },
): Promise<void> {
  const { batches } = input;
  let next = await batches.next();
  res.status(200);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  let total = 0;
  let pending = '{"devices":[';
  try {
    while (!next.done) {
      const batch = next.value;
      // Each device is already its wire-format JSON document (rendered by the database).
      const chunk = batch.join(',');
      pending += (total > 0 ? ',' : '') + chunk;
      total += batch.length;
      if (!res.write(pending)) await drained(res);
      pending = '';
      if (res.destroyed) return;
      next = await batches.next();
    }
    res.end(`${pending}],"total":${total},"quota":${input.quota}}`);
  } finally {
    if (res.destroyed || !res.writableEnded) await batches.return(undefined);
  }
}

/** Resolves on 'drain', or when the client went away (no drain will ever come). */
async function drained(res: Response): Promise<void> {
  const ac = new AbortController();
  try {
    await Promise.race([once(res, 'drain', { signal: ac.signal }), once(res, 'close', { signal: ac.signal })]);
  } finally {
    ac.abort();
  }
}

/**
 * A page of the list, its devices already JSON documents rendered by the database: written as
 * text, never re-parsed. Rendering them here from Device objects instead cost more in all
 * (2.3-2.6 against 2.1-2.3 ms of service and PostgreSQL CPU per page in
 * bench/devices-list.bench.ts): parsing 25 columns a row, JSON.stringify and the garbage they
 * leave outweigh what PostgreSQL spends on the documents.
 */
export function sendDevicePage(res: Response, page: DeviceJsonPage): void {
  // Encoded once, here: given a string, Node measured it for Content-Length, joined it to the
  // headers and encoded it again while writing, a sixth of the service's CPU for a page of 100.
  const body = Buffer.from(
    `{"devices":[${page.devices.join(',')}],"total":${page.total},"quota":${page.quota},"next_cursor":${JSON.stringify(page.nextCursor)}}`,
  );
  // Written directly: express's send would hash the whole page for an ETag no client of a
  // changing device list can use.
  res.status(200);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', body.length);
  res.end(body);
}
