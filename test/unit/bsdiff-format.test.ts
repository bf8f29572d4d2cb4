import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import fc from 'fast-check';
import { bsdiffBlocks } from '#core/firmware/delta/bsdiff';
import { loadBzip2 } from '#core/firmware/delta/bzip2';
import { encodeBsdiff40 } from '#core/firmware/delta/delta-format';
import { buildDeltaInWorker } from '#core/firmware/delta/delta-builder';
import { bspatch, DeltaApplyError } from '#simulator/bspatch';

/**
 * The delta format (docs/ota.md "Delta images"): what the service builds, the simulated module
 * applies byte for byte, and so does bsdiff 4.3's own bspatch (Debian's `bsdiff` package) when
 * it is installed; a corrupt delta is refused, never applied in part; and a build runs off the
 * event loop.
 */
const bzip2 = await loadBzip2();
const diff = (old: Uint8Array, neu: Uint8Array) =>
  encodeBsdiff40(bsdiffBlocks(old, neu), { newSize: neu.length, compress: (d) => bzip2.compress(d) });

/** A "release": the old image with bytes changed, a block inserted and one removed. */
function release(old: Buffer, seed: number): Buffer {
  const neu = Buffer.concat([old.subarray(0, 1000), randomBytes(300), old.subarray(1300 + (seed % 500))]);
  for (let i = seed % 97; i < neu.length; i += 1009) neu[i] = neu[i]! ^ 0xa5;
  return neu;
}

describe('BSDIFF40 deltas', () => {
  it('any old and new image round-trip through bsdiff and bspatch', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), fc.uint8Array({ maxLength: 2000 }), (old, neu) => {
        expect(Buffer.compare(Buffer.from(bspatch(old, diff(old, neu))), Buffer.from(neu))).toBe(0);
      }),
      { numRuns: 60 },
    );
  });

  it('a patch release gives a delta a fraction of the image', () => {
    const old = randomBytes(100_000);
    const neu = release(old, 7);
    const patch = diff(old, neu);
    expect(patch.length).toBeLessThan(neu.length / 10);
    expect(Buffer.compare(Buffer.from(bspatch(old, patch)), neu)).toBe(0);
  });

  it.skipIf(spawnSync('which', ['bspatch']).status !== 0)("bsdiff 4.3's own bspatch applies it", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bsdiff-'));
    try {
      const old = randomBytes(50_000);
      const neu = release(old, 3);
      fs.writeFileSync(path.join(dir, 'old'), old);
      fs.writeFileSync(path.join(dir, 'patch'), diff(old, neu));
      execFileSync('bspatch', [path.join(dir, 'old'), path.join(dir, 'new'), path.join(dir, 'patch')]);
      expect(Buffer.compare(fs.readFileSync(path.join(dir, 'new')), neu)).toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a corrupt or foreign delta is refused with DeltaApplyError', () => {
    const old = randomBytes(5_000);
    const patch = diff(old, release(old, 5));
    expect(() => bspatch(old, patch.subarray(0, 20))).toThrow(DeltaApplyError);
    expect(() => bspatch(old, Buffer.concat([Buffer.from('BSDIFF41'), patch.subarray(8)]))).toThrow(DeltaApplyError);
    const cut = Buffer.from(patch.subarray(0, patch.length - 40));
    expect(() => bspatch(old, cut)).toThrow(DeltaApplyError);
    const wrongSize = Buffer.from(patch);
    wrongSize[24] = wrongSize[24]! + 1;
    expect(() => bspatch(old, wrongSize)).toThrow(DeltaApplyError);
  });

  it('a build in the worker leaves the event loop free', { timeout: 60_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bsdiff-'));
    try {
      const old = randomBytes(3_000_000);
      const neu = release(old, 11);
      fs.writeFileSync(path.join(dir, 'old'), old);
      fs.writeFileSync(path.join(dir, 'new'), neu);
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const built = await buildDeltaInWorker({ oldPath: path.join(dir, 'old'), newPath: path.join(dir, 'new') });
      delay.disable();
      expect(built.sha256).toBe(createHash('sha256').update(built.patch).digest('hex'));
      expect(Buffer.compare(Buffer.from(bspatch(old, built.patch)), neu)).toBe(0);
      // Built on this thread, the loop would have waited the whole build at once; in the worker its
      // worst delay is a small fraction of it (on a loaded machine the OS alone stalls it by tens of ms).
      expect(built.buildMs).toBeGreaterThan(300);
      expect(delay.max / 1e6).toBeLessThan(built.buildMs / 4);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
