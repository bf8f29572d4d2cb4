/**
 * bsdiff 4 (Colin Percival, http://www.daemonology.net/bsdiff/, BSD licence), the algorithm of
 * bsdiff 4.3 ported line for line: Larsson-Sadakane suffix sorting (qsufsort) of the old image,
 * then one pass over the new image that emits control triples, a "diff" block (bytewise
 * differences over approximate matches) and an "extra" block (bytes with no match). The file
 * format around the blocks is delta-format.ts. Off the event loop only: this is seconds of CPU
 * for a few MB (bench/delta-build.ts); delta-builder.ts runs it in a worker.
 *
 * Memory: two Int32Array of (old size + 1) for the sort (I and V, 8 bytes per old byte; V is
 * released before the scan) and the diff and extra blocks (up to the new size each), besides
 * both images: about 10 x old + 3 x new bytes at the peak. The C original uses off_t (8 bytes)
 * and needs 17 x old; Int32 is enough because images are capped far below 2 GiB.
 */

/** The three blocks of a patch before compression. `ctrl` holds triples (add, copy, seek). */
export interface BsdiffBlocks {
  ctrl: number[];
  diff: Uint8Array;
  extra: Uint8Array;
}

function split(I: Int32Array, V: Int32Array, start: number, len: number, h: number): void {
  let i: number, j: number, k: number, x: number, tmp: number;
  if (len < 16) {
    for (k = start; k < start + len; k += j) {
      j = 1;
      x = V[I[k]! + h]!;
      for (i = 1; k + i < start + len; i++) {
        if (V[I[k + i]! + h]! < x) {
          x = V[I[k + i]! + h]!;
          j = 0;
        }
        if (V[I[k + i]! + h]! === x) {
          tmp = I[k + j]!;
          I[k + j] = I[k + i]!;
          I[k + i] = tmp;
          j++;
        }
      }
      for (i = 0; i < j; i++) V[I[k + i]!] = k + j - 1;
      if (j === 1) I[k] = -1;
    }
    return;
  }
  x = V[I[start + (len >> 1)]! + h]!;
  let jj = 0;
  let kk = 0;
  for (i = start; i < start + len; i++) {
    if (V[I[i]! + h]! < x) jj++;
    if (V[I[i]! + h]! === x) kk++;
  }
  jj += start;
  kk += jj;
  i = start;
  j = 0;
  k = 0;
  while (i < jj) {
    if (V[I[i]! + h]! < x) i++;
    else if (V[I[i]! + h]! === x) {
      tmp = I[i]!;
      I[i] = I[jj + j]!;
      I[jj + j] = tmp;
      j++;
    } else {
      tmp = I[i]!;
      I[i] = I[kk + k]!;
      I[kk + k] = tmp;
      k++;
    }
  }
  while (jj + j < kk) {
    if (V[I[jj + j]! + h]! === x) j++;
    else {
      tmp = I[jj + j]!;
      I[jj + j] = I[kk + k]!;
      I[kk + k] = tmp;
      k++;
    }
  }
  if (jj > start) split(I, V, start, jj - start, h);
  for (i = 0; i < kk - jj; i++) V[I[jj + i]!] = kk - 1;
  if (jj === kk - 1) I[jj] = -1;
  if (start + len > kk) split(I, V, kk, start + len - kk, h);
}

/** The suffix array of `old` (oldsize + 1 entries, the empty suffix first). */
export function qsufsort(old: Uint8Array): Int32Array {
  const oldsize = old.length;
  const I = new Int32Array(oldsize + 1);
  const V = new Int32Array(oldsize + 1);
  const buckets = new Int32Array(256);
  let i: number;
  for (i = 0; i < oldsize; i++) buckets[old[i]!]!++;
  for (i = 1; i < 256; i++) buckets[i]! += buckets[i - 1]!;
  for (i = 255; i > 0; i--) buckets[i] = buckets[i - 1]!;
  buckets[0] = 0;
  for (i = 0; i < oldsize; i++) I[++buckets[old[i]!]!] = i;
  I[0] = oldsize;
  for (i = 0; i < oldsize; i++) V[i] = buckets[old[i]!]!;
  V[oldsize] = 0;
  for (i = 1; i < 256; i++) if (buckets[i] === buckets[i - 1]! + 1) I[buckets[i]!] = -1;
  I[0] = -1;
  for (let h = 1; I[0] !== -(oldsize + 1); h += h) {
    let len = 0;
    for (i = 0; i < oldsize + 1;) {
      if (I[i]! < 0) {
        len -= I[i]!;
        i -= I[i]!;
      } else {
        if (len) I[i - len] = -len;
        len = V[I[i]!]! + 1 - i;
        split(I, V, i, len, h);
        i += len;
        len = 0;
      }
    }
    if (len) I[i - len] = -len;
  }
  for (i = 0; i < oldsize + 1; i++) I[V[i]!] = i;
  return I;
}

function matchlen(old: Uint8Array, oldStart: number, neu: Uint8Array, newStart: number): number {
  const n = Math.min(old.length - oldStart, neu.length - newStart);
  let i = 0;
  while (i < n && old[oldStart + i] === neu[newStart + i]) i++;
  return i;
}

/** memcmp(old + a, new + b, min(...)) < 0 */
function lessThan(old: Uint8Array, a: number, neu: Uint8Array, b: number): boolean {
  const n = Math.min(old.length - a, neu.length - b);
  for (let i = 0; i < n; i++) {
    const x = old[a + i]!;
    const y = neu[b + i]!;
    if (x !== y) return x < y;
  }
  return false;
}

/** The longest match of new[scan..] in old, by binary search over the suffix array. */
function search(
  I: Int32Array,
  old: Uint8Array,
  neu: Uint8Array,
  scan: number,
  range: { st: number; en: number },
): { len: number; pos: number } {
  let { st, en } = range;
  while (en - st >= 2) {
    const x = st + ((en - st) >> 1);
    if (lessThan(old, I[x]!, neu, scan)) st = x;
    else en = x;
  }
  const x = matchlen(old, I[st]!, neu, scan);
  const y = matchlen(old, I[en]!, neu, scan);
  return x > y ? { len: x, pos: I[st]! } : { len: y, pos: I[en]! };
}

/** The control, diff and extra blocks that turn `old` into `neu` (bsdiff 4.3's main loop). */
export function bsdiffBlocks(old: Uint8Array, neu: Uint8Array): BsdiffBlocks {
  const oldsize = old.length;
  const newsize = neu.length;
  const I = qsufsort(old);
  const db = new Uint8Array(newsize + 1);
  const eb = new Uint8Array(newsize + 1);
  const ctrl: number[] = [];
  let dblen = 0;
  let eblen = 0;
  let scan = 0;
  let len = 0;
  let pos = 0;
  let lastscan = 0;
  let lastpos = 0;
  let lastoffset = 0;
  const whole = { st: 0, en: oldsize };
  while (scan < newsize) {
    let oldscore = 0;
    let scsc: number;
    for (scsc = scan += len; scan < newsize; scan++) {
      ({ len, pos } = search(I, old, neu, scan, whole));
      for (; scsc < scan + len; scsc++)
        if (scsc + lastoffset < oldsize && old[scsc + lastoffset] === neu[scsc]) oldscore++;
      if ((len === oldscore && len !== 0) || len > oldscore + 8) break;
      if (scan + lastoffset < oldsize && old[scan + lastoffset] === neu[scan]) oldscore--;
    }
    if (len !== oldscore || scan === newsize) {
      let s = 0;
      let Sf = 0;
      let lenf = 0;
      for (let i = 0; lastscan + i < scan && lastpos + i < oldsize;) {
        if (old[lastpos + i] === neu[lastscan + i]) s++;
        i++;
        if (s * 2 - i > Sf * 2 - lenf) {
          Sf = s;
          lenf = i;
        }
      }
      let lenb = 0;
      if (scan < newsize) {
        s = 0;
        let Sb = 0;
        for (let i = 1; scan >= lastscan + i && pos >= i; i++) {
          if (old[pos - i] === neu[scan - i]) s++;
          if (s * 2 - i > Sb * 2 - lenb) {
            Sb = s;
            lenb = i;
          }
        }
      }
      if (lastscan + lenf > scan - lenb) {
        const overlap = lastscan + lenf - (scan - lenb);
        s = 0;
        let Ss = 0;
        let lens = 0;
        for (let i = 0; i < overlap; i++) {
          if (neu[lastscan + lenf - overlap + i] === old[lastpos + lenf - overlap + i]) s++;
          if (neu[scan - lenb + i] === old[pos - lenb + i]) s--;
          if (s > Ss) {
            Ss = s;
            lens = i + 1;
          }
        }
        lenf += lens - overlap;
        lenb -= lens;
      }
      for (let i = 0; i < lenf; i++) db[dblen + i] = (neu[lastscan + i]! - old[lastpos + i]!) & 0xff;
      const extra = scan - lenb - (lastscan + lenf);
      for (let i = 0; i < extra; i++) eb[eblen + i] = neu[lastscan + lenf + i]!;
      dblen += lenf;
      eblen += extra;
      ctrl.push(lenf, extra, pos - lenb - (lastpos + lenf));
      lastscan = scan - lenb;
      lastpos = pos - lenb;
      lastoffset = pos - scan;
    }
  }
  return { ctrl, diff: db.subarray(0, dblen), extra: eb.subarray(0, eblen) };
}
