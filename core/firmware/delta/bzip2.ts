import createLibbzip2 from 'libbzip2-wasm';

/**
 * bzip2 compression by libbzip2 itself (1.0.x compiled to WebAssembly by the `libbzip2-wasm`
 * package, the build CyberChef uses): no native module, so `npm install` needs no compiler, and
 * the output is the standard .bz2 stream every bspatch decoder reads (checked against the
 * `bzip2` command in test/unit/bsdiff-format.test.ts when it is installed).
 */
export interface Bzip2 {
  compress(input: Uint8Array): Uint8Array;
}

/** bsdiff 4.3 compresses with block size 9 (900 kB) and the default work factor (30). */
const BLOCK_SIZE_100K = 9;
const WORK_FACTOR = 30;

/**
 * One WebAssembly instance (its memory grows with the largest input and never shrinks: load it
 * in the worker that builds, which ends afterwards). The emscripten module object is itself a
 * "thenable" whose `then` resolves to itself; awaiting it directly would never settle, so its
 * `then` is taken away once it is ready.
 */
export function loadBzip2(): Promise<Bzip2> {
  return new Promise((resolve, reject) => {
    const module = createLibbzip2();
    module.then((ready) => {
      delete (ready as { then?: unknown }).then;
      resolve({
        compress(input) {
          const result = ready.compressBZ2(input, BLOCK_SIZE_100K, WORK_FACTOR);
          if (result.error !== 0)
            throw new Error(`bzip2 compression failed (${result.error}): ${result.error_msg ?? ''}`);
          // A copy: the view points into the WebAssembly memory, which the next call may move.
          return Uint8Array.from(result.output);
        },
      });
    });
    // A module that fails to instantiate aborts with a thrown string.
    module.onAbort = (what: unknown) => reject(new Error(`bzip2 module failed to load: ${String(what)}`));
  });
}
