import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { appRoot } from '../../shared/app-root';
import type { DeltaJob, DeltaWorkerAnswer } from './delta-worker';

/** What a finished build answers. */
export interface BuiltDelta {
  patch: Uint8Array;
  sha256: string;
  buildMs: number;
}

/** Limits of a build (docs/ota.md "Delta images"). */
export interface DeltaBuildLimits {
  /** The worker's V8 heap (MB): bsdiff's arrays live outside it, bounded by the image size cap. Default 96. */
  maxHeapMb?: number;
  /** A build still running after this long is stopped (ms). Default 10 minutes. */
  timeoutMs?: number;
  /** Aborting ends the build at once (the service stops): the worker is terminated. */
  signal?: AbortSignal;
}

/**
 * The ESM entry of tsx's API (its CommonJS entry cannot register hooks in a worker), found through
 * tsx's own exports map: `import.meta.resolve` is not available under vitest's module runner.
 */
function tsxEsmApi(from: string): string {
  const manifest = createRequire(from).resolve('tsx/package.json');
  const exports = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports: Record<string, unknown> }).exports;
  const api = exports['./esm/api'] as { import: { default: string } };
  return pathToFileURL(path.join(path.dirname(manifest), api.import.default)).href;
}

/**
 * Where the worker's code is: beside this module when the service runs from its sources (tsx,
 * vitest: the worker registers tsx first), `server/delta-worker.js` of the artifact when it runs
 * from `npm run build`'s output (deploy/build.ts bundles it as an entry of its own).
 */
function workerSource(): { code: string; eval: true } | { file: string; eval: false } {
  const here = import.meta.url;
  if (here.endsWith('.ts')) {
    const tsx = tsxEsmApi(here);
    const entry = new URL('./delta-worker.ts', here).href;
    return {
      eval: true,
      code: `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`,
    };
  }
  return { eval: false, file: path.join(appRoot(here), 'server', 'delta-worker.js') };
}

/**
 * Builds one delta in a worker thread, never on the event loop (a build is seconds of CPU), with
 * a heap limit and a time limit; the worker ends with the build, so its memory (bsdiff's arrays,
 * bzip2's WebAssembly memory) goes back at once. Rejects with the reason when the build fails,
 * runs out of memory or time.
 */
export function buildDeltaInWorker(job: DeltaJob, limits: DeltaBuildLimits = {}): Promise<BuiltDelta> {
  const source = workerSource();
  const worker = new Worker(source.eval ? source.code : source.file, {
    eval: source.eval,
    workerData: job,
    resourceLimits: { maxOldGenerationSizeMb: limits.maxHeapMb ?? 96 },
    stdout: false,
    stderr: false,
  });
  return new Promise<BuiltDelta>((resolve, reject) => {
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
      void worker.terminate();
    };
    const timer = setTimeout(
      () => finish(() => reject(new Error(`delta build took longer than ${limits.timeoutMs ?? 600_000} ms`))),
      limits.timeoutMs ?? 600_000,
    );
    if (limits.signal?.aborted) finish(() => reject(new Error('delta build stopped: the service stops')));
    limits.signal?.addEventListener('abort', () =>
      finish(() => reject(new Error('delta build stopped: the service stops'))),
    );
    timer.unref();
    worker.once('message', (answer: DeltaWorkerAnswer) =>
      finish(() =>
        answer.ok
          ? resolve({ patch: answer.patch, sha256: answer.sha256, buildMs: answer.buildMs })
          : reject(new Error(answer.error)),
      ),
    );
    worker.once('error', (err) => finish(() => reject(err)));
    worker.once('exit', (code) => finish(() => reject(new Error(`delta worker exited with code ${code}`))));
  });
}
