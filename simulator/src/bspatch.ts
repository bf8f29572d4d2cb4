import Bunzip from 'seek-bzip';

/**
 * bspatch for the simulated device: applies a BSDIFF40 delta (docs/ota.md "Delta images": the
 * header, bzip2-compressed control, diff and extra blocks) to the image the device runs, the way
 * bspatch 4.3 does, with its checks: a patch that is not BSDIFF40, whose lengths do not add up,
 * or whose control block writes past the new size is refused (`DeltaApplyError`), never applied
 * in part. A real device streams the three blocks and writes flash as it goes; the simulator
 * holds the images in memory.
 */
export class DeltaApplyError extends Error {}

const HEADER = 32;

/** bsdiff's offtin: 64-bit sign-and-magnitude, little-endian. */
function readOfft(buf: Uint8Array, at: number): number {
  let y = buf[at + 7]! & 0x7f;
  for (let i = 6; i >= 0; i--) y = y * 256 + buf[at + i]!;
  return buf[at + 7]! & 0x80 ? -y : y;
}

function bunzip(block: Uint8Array, what: string): Uint8Array {
  try {
    return Bunzip.decode(block);
  } catch (err) {
    throw new DeltaApplyError(`corrupt delta: the ${what} block is not bzip2 (${(err as Error).message})`);
  }
}

export function bspatch(old: Uint8Array, patch: Uint8Array): Uint8Array {
  if (patch.length < HEADER || new TextDecoder().decode(patch.subarray(0, 8)) !== 'BSDIFF40')
    throw new DeltaApplyError('not a BSDIFF40 delta');
  const ctrlLen = readOfft(patch, 8);
  const diffLen = readOfft(patch, 16);
  const newSize = readOfft(patch, 24);
  if (ctrlLen < 0 || diffLen < 0 || newSize < 0 || HEADER + ctrlLen + diffLen > patch.length)
    throw new DeltaApplyError('corrupt delta: bad header lengths');
  const ctrl = bunzip(patch.subarray(HEADER, HEADER + ctrlLen), 'control');
  const diff = bunzip(patch.subarray(HEADER + ctrlLen, HEADER + ctrlLen + diffLen), 'diff');
  const extra = bunzip(patch.subarray(HEADER + ctrlLen + diffLen), 'extra');
  const out = new Uint8Array(newSize);
  let oldpos = 0;
  let newpos = 0;
  let c = 0;
  let d = 0;
  let e = 0;
  while (newpos < newSize) {
    if (c + 24 > ctrl.length) throw new DeltaApplyError('corrupt delta: control block ends early');
    const add = readOfft(ctrl, c);
    const copy = readOfft(ctrl, c + 8);
    const seek = readOfft(ctrl, c + 16);
    c += 24;
    if (add < 0 || copy < 0 || newpos + add > newSize || d + add > diff.length)
      throw new DeltaApplyError('corrupt delta: diff run out of range');
    for (let i = 0; i < add; i++) {
      const o = oldpos + i;
      out[newpos + i] = (diff[d + i]! + (o >= 0 && o < old.length ? old[o]! : 0)) & 0xff;
    }
    d += add;
    newpos += add;
    oldpos += add;
    if (newpos + copy > newSize || e + copy > extra.length)
      throw new DeltaApplyError('corrupt delta: extra run out of range');
    out.set(extra.subarray(e, e + copy), newpos);
    e += copy;
    newpos += copy;
    oldpos += seek;
  }
  return out;
}
