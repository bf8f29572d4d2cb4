import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parentPort, workerData } from 'node:worker_threads';
import { bsdiffBlocks } from './bsdiff';
import { loadBzip2 } from './bzip2';
import { encodeBsdiff40 } from './delta-format';

/**
 * The worker that builds one delta (delta-builder.ts starts it): reads both images from firmware
 * storage itself, so the service's thread never holds them, and answers the BSDIFF40 file
 * (transferred, not copied) with its SHA-256, or an error message.
 */
export interface DeltaJob {
  oldPath: string;
  newPath: string;
}

export type DeltaWorkerAnswer =
  { ok: true; patch: Uint8Array; sha256: string; buildMs: number } | { ok: false; error: string };

async function build(job: DeltaJob): Promise<DeltaWorkerAnswer> {
  const started = performance.now();
  const [old, neu] = await Promise.all([readFile(job.oldPath), readFile(job.newPath)]);
  const bzip2 = await loadBzip2();
  const patch = encodeBsdiff40(bsdiffBlocks(old, neu), { newSize: neu.length, compress: (d) => bzip2.compress(d) });
  const sha256 = createHash('sha256').update(patch).digest('hex');
  return { ok: true, patch, sha256, buildMs: Math.round(performance.now() - started) };
}

if (parentPort) {
  const port = parentPort;
  build(workerData as DeltaJob).then(
    (answer) => port.postMessage(answer, answer.ok ? [answer.patch.buffer as ArrayBuffer] : []),
    (err: unknown) => port.postMessage({ ok: false, error: err instanceof Error ? err.message : String(err) }),
  );
}
