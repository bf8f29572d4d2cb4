import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream, type ReadStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
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

export class FirmwareStorage {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'firmware');
  }

  /** Streams `source` to a temp file while hashing; refuses (413) past `maxBytes` and removes the partial file. */
  async writeTemp(source: Readable, maxBytes: number): Promise<StoredTemp> {
    await mkdir(this.dir, { recursive: true });
    const tempPath = path.join(this.dir, `.tmp-${randomUUID()}`);
    const hash = createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > maxBytes) {
          done(new DomainError('payload_too_large', `The firmware file is larger than the limit of ${maxBytes} bytes.`));
          return;
        }
        hash.update(chunk);
        done(null, chunk);
      },
    });
    // busboy (limit set one byte above ours) signals with a `limit` event on the file stream.
    source.once('limit', () => meter.destroy(new DomainError('payload_too_large', `The firmware file is larger than the limit of ${maxBytes} bytes.`)));
    try {
      await pipeline(source, meter, createWriteStream(tempPath, { mode: 0o600 }));
    } catch (error) {
      await rm(tempPath, { force: true });
      source.resume();
      throw error;
    }
    return { tempPath, size, sha256: hash.digest('hex') };
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

  open(storageKey: string, range?: { start: number; end: number }): ReadStream {
    return createReadStream(this.pathOf(storageKey), range ? { start: range.start, end: range.end, highWaterMark: 256 * 1024 } : { highWaterMark: 256 * 1024 });
  }

  private pathOf(storageKey: string): string {
    // Keys are ours, but a database row is still input to a file path: never let it escape the folder.
    if (!STORAGE_KEY.test(storageKey)) throw new Error('invalid storage key');
    return path.join(this.dir, storageKey);
  }
}
