import type { BsdiffBlocks } from './bsdiff';

/**
 * The one delta format the service builds and offers (docs/ota.md "Delta images"): BSDIFF40,
 * the file format of bsdiff 4.x, byte for byte, so the bspatch of bsdiff 4.3 and its embedded
 * ports apply it unchanged.
 *
 *   offset  size  field
 *   0       8     magic "BSDIFF40"
 *   8       8     length X of the compressed control block
 *   16      8     length Y of the compressed diff block
 *   24      8     size of the new (target) image
 *   32      X     bzip2(control block): triples of 8-byte integers (add, copy, seek)
 *   32+X    Y     bzip2(diff block)
 *   32+X+Y  rest  bzip2(extra block)
 *
 * Integers are 64-bit sign-and-magnitude, little-endian: the magnitude in the low 63 bits, the
 * sign in the top bit of the last byte (bsdiff's offtout). A format name is part of the cache key
 * and of the OTA command, so another format can come later beside this one.
 */
export const DELTA_FORMAT = 'bsdiff40' as const;
export type DeltaFormat = typeof DELTA_FORMAT;

export const BSDIFF40_MAGIC = 'BSDIFF40';
export const BSDIFF40_HEADER_BYTES = 32;

export function writeOfft(value: number, target: Uint8Array, at: number): void {
  let y = Math.abs(value);
  for (let i = 0; i < 8; i++) {
    target[at + i] = y % 256;
    y = Math.floor(y / 256);
  }
  if (value < 0) target[at + 7]! |= 0x80;
}

/** Assembles a BSDIFF40 file from the blocks of bsdiff.ts. */
export function encodeBsdiff40(
  blocks: BsdiffBlocks,
  input: { newSize: number; compress: (data: Uint8Array) => Uint8Array },
): Uint8Array {
  const ctrl = new Uint8Array(blocks.ctrl.length * 8);
  blocks.ctrl.forEach((v, i) => writeOfft(v, ctrl, i * 8));
  const zctrl = input.compress(ctrl);
  const zdiff = input.compress(blocks.diff);
  const zextra = input.compress(blocks.extra);
  const out = new Uint8Array(BSDIFF40_HEADER_BYTES + zctrl.length + zdiff.length + zextra.length);
  out.set(new TextEncoder().encode(BSDIFF40_MAGIC), 0);
  writeOfft(zctrl.length, out, 8);
  writeOfft(zdiff.length, out, 16);
  writeOfft(input.newSize, out, 24);
  out.set(zctrl, BSDIFF40_HEADER_BYTES);
  out.set(zdiff, BSDIFF40_HEADER_BYTES + zctrl.length);
  out.set(zextra, BSDIFF40_HEADER_BYTES + zctrl.length + zdiff.length);
  return out;
}

/**
 * Largest image (old or new) a delta is built for by default: 32 MiB. Building needs about
 * 10 x old + 3 x new bytes (bsdiff.ts), 416 MiB at this size, plus bzip2's buffers. Images above
 * the limit are sent whole. Set by DELTA_MAX_IMAGE_BYTES.
 */
export const DEFAULT_DELTA_MAX_IMAGE_BYTES = 32 * 1024 * 1024;

/** The memory a build needs for these sizes (bytes), with bzip2's working set (about 8 MB at block size 9). */
export function buildMemoryBytes(input: { oldSize: number; newSize: number }): number {
  return 10 * input.oldSize + 3 * input.newSize + 16 * 1024 * 1024;
}
