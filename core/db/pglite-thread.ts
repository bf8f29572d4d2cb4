import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { RawProtocolRunner } from './pglite-protocol';

/**
 * The embedded database's own thread (core/db/pglite-worker-client.ts starts it): PGlite's
 * WebAssembly runs here, so a long query, a checkpoint or a big flush never stalls the service's
 * event loop. It speaks the PostgreSQL wire protocol with the main thread: a request is the raw
 * frontend messages of one round trip, the answer the raw backend messages, which the main
 * thread parses. The main thread keeps the data folder's lock.
 */

export interface ThreadOptions {
  /** PGlite's data folder. */
  dataDir: string;
}

export type ThreadRequest =
  { kind: 'exec'; id: number; bytes: Uint8Array } | { kind: 'ping'; id: number } | { kind: 'close'; id: number };

export type ThreadReply =
  | { kind: 'ready' }
  | { kind: 'openFailed'; message: string }
  | { kind: 'result'; id: number; bytes: Uint8Array }
  | { kind: 'failed'; id: number; message: string }
  | { kind: 'closed'; id: number };

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('pglite-thread.ts runs as a worker thread only');
  const { dataDir } = workerData as ThreadOptions;
  let pglite: PGlite;
  try {
    pglite = await PGlite.create(dataDir);
  } catch (error) {
    port.postMessage({ kind: 'openFailed', message: (error as Error).message } satisfies ThreadReply);
    return;
  }
  const post = (reply: ThreadReply, transfer: ArrayBuffer[] = []) => port.postMessage(reply, transfer);

  const protocol = new RawProtocolRunner(pglite);

  // Requests are answered in the order they came: the wire protocol is one ordered stream.
  let queue = Promise.resolve();
  port.on('message', (request: ThreadRequest) => {
    queue = queue.then(async () => {
      if (request.kind === 'ping') {
        post({ kind: 'result', id: request.id, bytes: new Uint8Array(0) });
        return;
      }
      if (request.kind === 'close') {
        await pglite.close();
        post({ kind: 'closed', id: request.id });
        port.close();
        return;
      }
      let answer: Uint8Array;
      try {
        answer = await protocol.run(request.bytes);
      } catch (error) {
        // Not an SQL error (those are protocol messages in the answer): PGlite itself failed, and
        // its state is unknown. Say why, then end the thread; the main thread starts a new one.
        post({ kind: 'failed', id: request.id, message: (error as Error).message });
        process.exit(1);
      }
      post({ kind: 'result', id: request.id, bytes: answer }, [answer.buffer as ArrayBuffer]);
    });
  });
  post({ kind: 'ready' });
}

await main();
