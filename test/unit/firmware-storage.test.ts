import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { FirmwareStorage } from '../../api/src/domain/firmware/firmware-storage';

async function bytesOf(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(parts);
}

describe('firmware storage downloads', () => {
  it('serves the same bytes from memory as from disk, whole and by range, keeps small files in memory and forgets a removed one', async () => {
    const storage = new FirmwareStorage(fs.mkdtempSync(path.join(os.tmpdir(), 'fw-storage-')));
    const content = randomBytes(600 * 1024 + 7);
    const temp = await storage.writeTemp(Readable.from([content]), 10 * 1024 * 1024);
    const key = await storage.commit(temp, '0e2b8f9c-8f0a-4c55-9b59-1c1d2f3a4b5c');
    const size = content.length;
    for (const range of [
      undefined,
      { start: 0, end: 0 },
      { start: 100, end: 262_200 },
      { start: size - 10, end: size - 1 },
      { start: 5, end: size + 1000 },
    ]) {
      const fromMemory = await storage.inMemory(key, size, range)!;
      const fromDisk = await bytesOf(storage.open(key, range));
      const expected = range ? content.subarray(range.start, range.end + 1) : content;
      expect(fromMemory.equals(expected), JSON.stringify(range)).toBe(true);
      expect(fromDisk.equals(expected), JSON.stringify(range)).toBe(true);
    }
    // Served from memory: the bytes outlive the file on disk (no open file per download)...
    fs.rmSync(path.join(storage.dir, key));
    expect((await storage.inMemory(key, size, { start: 10, end: 19 })!).equals(content.subarray(10, 20))).toBe(true);
    await expect(bytesOf(storage.open(key))).rejects.toThrow(/ENOENT/);
    // ...until the binary is removed through the storage.
    await storage.remove(key);
    await expect(storage.inMemory(key, size)!).rejects.toThrow(/ENOENT/);
    // Larger binaries are not kept in memory: they stream from disk.
    expect(storage.inMemory(key, 64 * 1024 * 1024)).toBeNull();
  });
});
