import { once } from 'node:events';
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DomainError } from '../shared/errors';

/**
 * Firmware binaries live on disk under `DATA_DIR/firmware/<storage_key>` (docs/ota.md "Storage"):
 * the database keeps only the record (size, sha256, storage key). Files are written to a
 * `.tmp-*` name while being hashed and counted, and renamed to their storage key only once the
 * record is valid, so a half-uploaded or refused file never gets a key. Downloads stream from
 * disk (never a whole file in memory). In cluster mode every process must see the same
 * DATA_DIR/firmware (a shared volume); that is the price of not putting binaries in PostgreSQL.
 */
export interface StoredTemp {
  tempPath: string;
  size: number;
  sha256: string;
}

const STORAGE_KEY = /^[0-9a-f-]{36}\.bin$/;

/**
 * The longest an upload can take: Node's HTTP server answers 408 and closes the connection of a
 * request whose body has not fully arrived within `requestTimeout`, 300 s by default (HttpServer
 * keeps the default; the check runs every 30 s), and the request removes or renames its temp file
 * as it ends.
 */
const UPLOAD_REQUEST_TIMEOUT_MS = 300_000;
/**
 * A `.tmp-*` file whose last write is older than this belongs to no upload under way (an upload
 * writes to it at least until its last byte, and removes or renames it soon after): 12 request
 * timeouts, one hour, leaves room for the database steps after the last byte and for clocks
 * that differ between the hosts of a shared volume. Removed at start (`removeStaleTemps`).
 */
export const STALE_TEMP_AGE_MS = 12 * UPLOAD_REQUEST_TIMEOUT_MS;

/** Downloads are written in pieces of this size (from disk or from memory). */
const CHUNK = 256 * 1024;
/** Binaries up to this size are served from memory (typical module images are 0.5 to 8 MB). */
const MAX_CACHED_FILE = 16 * 1024 * 1024;
/** Memory for cached binaries at most; the least recently downloaded leave first. */
const MAX_CACHED_BYTES = 64 * 1024 * 1024;

export class FirmwareStorage {
  readonly dir: string;
  private readonly cache = new Map<string, { content: Promise<Buffer>; size: number }>();
  private cachedBytes = 0;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'firmware');
  }

  /**
   * Streams `source` to a temp file while hashing; refuses (413) past `maxBytes` and removes the
   * partial file. A `source` that errors or is destroyed (a form cut off, a client gone) rejects,
   * and the partial file is removed and its descriptor closed.
   */
  async writeTemp(source: Readable, maxBytes: number): Promise<StoredTemp> {
    const tooLarge = () =>
      new DomainError('payload_too_large', `The firmware file is larger than the limit of ${maxBytes} bytes.`);
    const hash = createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > maxBytes) {
          done(tooLarge());
          return;
        }
        hash.update(chunk);
        done(null, chunk);
      },
    });
    // Every stream gets its listeners before the first await: busboy destroys a file stream whose
    // form ends early ("Unexpected end of form") at any moment, also while the folder is still being
    // created, and an 'error' event nobody listens to ends the process. The pipeline below takes
    // over; until it runs, the first error is kept and refuses the upload.
    const early: { error: Error | null } = { error: null };
    const keep = (error: Error) => {
      early.error ??= error;
    };
    source.on('error', keep);
    meter.on('error', keep);
    // busboy (limit set one byte above ours) signals with a `limit` event on the file stream.
    source.once('limit', () => meter.destroy(tooLarge()));
    try {
      await mkdir(this.dir, { recursive: true });
    } catch (error) {
      source.resume();
      throw error;
    }
    // Nothing reads `source` before the pipeline: destroyed by now means cut off, not finished.
    const refused = early.error ?? (source.destroyed ? new Error('The upload ended before its file did.') : null);
    if (refused) {
      source.resume();
      throw refused;
    }
    const tempPath = path.join(this.dir, `.tmp-${randomUUID()}`);
    const file = createWriteStream(tempPath, { mode: 0o600 });
    try {
      await pipeline(source, meter, file);
    } catch (error) {
      // The file is opened asynchronously: a refusal in the first chunk can come before the open,
      // and a removal then would run before the file exists and leave it behind. Wait until the
      // stream has closed its descriptor, then remove.
      if (!file.closed) await once(file, 'close').catch(() => undefined);
      await rm(tempPath, { force: true });
      source.resume();
      throw error;
    }
    return { tempPath, size, sha256: hash.digest('hex') };
  }

  /**
   * Removes the temp files of uploads that can no longer be under way: `.tmp-*` files not written
   * to for STALE_TEMP_AGE_MS. A process removes its own temp file when the request ends in any
   * way; these are left by a process that died during an upload. Younger files may belong to an
   * upload another process sharing the folder (cluster mode) is receiving, and stay. Never throws
   * (a file that cannot be read or removed is left for the next start); answers the names removed.
   */
  async removeStaleTemps(now = Date.now()): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return [];
    }
    const removed: string[] = [];
    for (const name of names) {
      if (!name.startsWith('.tmp-')) continue;
      const tempPath = path.join(this.dir, name);
      try {
        const info = await lstat(tempPath);
        if (!info.isFile() || now - info.mtimeMs <= STALE_TEMP_AGE_MS) continue;
        await rm(tempPath, { force: true });
        removed.push(name);
      } catch {
        // Removed by another process meanwhile, or not ours to remove: left alone.
      }
    }
    return removed;
  }

  /** Gives a temp file its permanent key (a rename within one folder: atomic). */
  async commit(temp: StoredTemp, id: string): Promise<string> {
    const key = `${id}.bin`;
    await rename(temp.tempPath, path.join(this.dir, key));
    return key;
  }

  async discard(temp: StoredTemp): Promise<void> {
    await rm(temp.tempPath, { force: true });
  }

  async remove(storageKey: string): Promise<void> {
    const cached = this.cache.get(storageKey);
    if (cached) this.evict(storageKey, cached);
    await rm(this.pathOf(storageKey), { force: true });
  }

  /** Size on disk, or null when the file is missing. */
  async sizeOf(storageKey: string): Promise<number | null> {
    try {
      return (await stat(this.pathOf(storageKey))).size;
    } catch {
      return null;
    }
  }

  /**
   * The file, or one byte range of it (inclusive), from memory for binaries up to MAX_CACHED_FILE
   * (by the size the record says); null for larger ones, which `open` streams from disk. During a
   * deployment thousands of devices fetch the same image at once: one open file per download ran
   * the process out of file descriptors (EMFILE with 10,000 devices, bench/ota.bench.ts), and a
   * stream pipeline per download cost more CPU than the bytes. Files never change under their key.
   */
  inMemory(storageKey: string, size: number, range?: { start: number; end: number }): Promise<Buffer> | null {
    if (size > MAX_CACHED_FILE) return null;
    return this.content(storageKey, size).then((buffer) =>
      range ? buffer.subarray(range.start, Math.min(range.end + 1, buffer.length)) : buffer,
    );
  }

  /** The file, or one byte range of it (inclusive), streamed from disk. */
  open(storageKey: string, range?: { start: number; end: number }): Readable {
    return createReadStream(
      this.pathOf(storageKey),
      range ? { start: range.start, end: range.end, highWaterMark: CHUNK } : { highWaterMark: CHUNK },
    );
  }

  /**
   * Loads a binary into memory before thousands of devices are told to fetch it: the first
   * download must not need a file descriptor at the moment 10,000 sockets arrive (measured: the
   * file open failed with EMFILE once commands went out at full speed, bench/ota.bench.ts).
   * Never throws; a file that cannot be read is read again by the download.
   */
  async warm(storageKey: string, size: number): Promise<void> {
    await this.inMemory(storageKey, size)?.catch(() => undefined);
  }

  private content(storageKey: string, size: number): Promise<Buffer> {
    const cached = this.cache.get(storageKey);
    if (cached) {
      // Most recently used last: eviction takes the oldest.
      this.cache.delete(storageKey);
      this.cache.set(storageKey, cached);
      return cached.content;
    }
    while (this.cache.size > 0 && this.cachedBytes + size > MAX_CACHED_BYTES) {
      const [oldest, entry] = this.cache.entries().next().value as [string, { content: Promise<Buffer>; size: number }];
      this.evict(oldest, entry);
    }
    const entry = { content: readFile(this.pathOf(storageKey)), size };
    this.cache.set(storageKey, entry);
    this.cachedBytes += size;
    // A file that could not be read is asked for again next time, not remembered as missing.
    entry.content.catch(() => this.evict(storageKey, entry));
    return entry.content;
  }

  private evict(storageKey: string, entry: { size: number }): void {
    if (this.cache.get(storageKey) !== entry) return;
    this.cache.delete(storageKey);
    this.cachedBytes -= entry.size;
  }

  /** The file of a key, for a reader of its own (the delta builder's worker reads both images itself). */
  pathFor(storageKey: string): string {
    return this.pathOf(storageKey);
  }

  private pathOf(storageKey: string): string {
    // Keys are ours, but a database row is still input to a file path: never let it escape the folder.
    if (!STORAGE_KEY.test(storageKey)) throw new Error('invalid storage key');
    return path.join(this.dir, storageKey);
  }
}
