import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

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

/** Splits concatenated frontend messages (type byte, then a length that counts itself). */
function splitMessages(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const messages: Uint8Array[] = [];
  for (let offset = 0; offset < bytes.byteLength;) {
    if (offset + 5 > bytes.byteLength) throw new Error('truncated protocol message');
    const end = offset + 1 + view.getUint32(offset + 1);
    if (end > bytes.byteLength) throw new Error('truncated protocol message');
    messages.push(bytes.subarray(offset, end));
    offset = end;
  }
  return messages;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

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

  async function exec(bytes: Uint8Array): Promise<Uint8Array> {
    const messages = splitMessages(bytes);
    const answers: Uint8Array[] = [];
    // One message at a time, as PGlite's node-postgres adapter feeds it; the folder is synced
    // once, after the last, before the answer leaves: a commit is on disk when the caller hears of it.
    for (let i = 0; i < messages.length; i++)
      answers.push(await pglite.execProtocolRaw(messages[i]!, { syncToFs: i === messages.length - 1 }));
    return concat(answers);
  }

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
        answer = await exec(request.bytes);
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
