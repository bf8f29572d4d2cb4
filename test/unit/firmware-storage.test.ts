import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { FirmwareStorage, STALE_TEMP_AGE_MS } from '#core/firmware/firmware-storage';

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

/** Runs `work`, collecting the errors the process would have died of meanwhile (an 'error' event nobody listened to). */
async function uncaughtDuring(work: () => Promise<void>): Promise<string[]> {
  const uncaught: string[] = [];
  const onUncaught = (error: Error) => uncaught.push(error.message);
  process.on('uncaughtException', onUncaught);
  try {
    await work();
    // The stream errors of `work` are emitted on the next ticks: let them come.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('uncaughtException', onUncaught);
  }
  return uncaught;
}

describe('firmware storage uploads cut off', () => {
  // busboy ends a file part this way when its form ends early (destroy with an error), when the
  // request goes away (destroy), or past the size limit (a `limit` event): here at once, while
  // the storage is still creating its folder.
  it.each([
    [
      'destroyed with an error',
      (s: PassThrough) => s.destroy(new Error('Unexpected end of form')),
      /Unexpected end of form/,
    ],
    ['destroyed', (s: PassThrough) => s.destroy(), /ended before|premature close/i],
    ['over the size limit', (s: PassThrough) => s.emit('limit'), /larger than the limit/],
  ])(
    'refuses a source %s before the first byte is written, without an unhandled error or a file left',
    async (_what, cut, message) => {
      const storage = new FirmwareStorage(fs.mkdtempSync(path.join(os.tmpdir(), 'fw-storage-')));
      const source = new PassThrough();
      source.write(randomBytes(1000));
      const uncaught = await uncaughtDuring(async () => {
        const written = storage.writeTemp(source, 64 * 1024);
        cut(source);
        await expect(written).rejects.toThrow(message);
      });
      expect(uncaught).toEqual([]);
      expect(fs.existsSync(storage.dir) ? fs.readdirSync(storage.dir) : []).toEqual([]);
    },
  );

  it('refuses a source destroyed in the middle of the file and removes the partial file', async () => {
    const storage = new FirmwareStorage(fs.mkdtempSync(path.join(os.tmpdir(), 'fw-storage-')));
    const source = new PassThrough();
    const written = storage.writeTemp(source, 1024 * 1024);
    source.write(randomBytes(100_000));
    await expect.poll(() => (fs.existsSync(storage.dir) ? fs.readdirSync(storage.dir) : []).length).toBe(1);
    source.destroy(new Error('aborted'));
    await expect(written).rejects.toThrow('aborted');
    expect(fs.readdirSync(storage.dir)).toEqual([]);
  });
});

describe('firmware storage start-up sweep', () => {
  it('removes temp files not written to for STALE_TEMP_AGE_MS, keeps younger ones (another process may be writing them) and binaries', async () => {
    const storage = new FirmwareStorage(fs.mkdtempSync(path.join(os.tmpdir(), 'fw-storage-')));
    fs.mkdirSync(storage.dir);
    const now = Date.now();
    const files: Record<string, number> = {
      '.tmp-dead-for-a-day': now - 24 * 60 * 60 * 1000,
      '.tmp-dead-just-past-the-age': now - STALE_TEMP_AGE_MS - 60_000,
      '.tmp-just-under-the-age': now - STALE_TEMP_AGE_MS + 60_000,
      '.tmp-being-written': now,
      '0e2b8f9c-8f0a-4c55-9b59-1c1d2f3a4b5c.bin': now - 24 * 60 * 60 * 1000,
    };
    for (const [name, mtime] of Object.entries(files)) {
      fs.writeFileSync(path.join(storage.dir, name), 'x');
      fs.utimesSync(path.join(storage.dir, name), mtime / 1000, mtime / 1000);
    }

    const removed = await storage.removeStaleTemps(now);

    expect(removed.sort()).toEqual(['.tmp-dead-for-a-day', '.tmp-dead-just-past-the-age']);
    expect(fs.readdirSync(storage.dir).sort()).toEqual([
      '.tmp-being-written',
      '.tmp-just-under-the-age',
      '0e2b8f9c-8f0a-4c55-9b59-1c1d2f3a4b5c.bin',
    ]);
    // A folder not there yet (no upload ever) is nothing to sweep.
    expect(await new FirmwareStorage(path.join(storage.dir, 'nothing-here')).removeStaleTemps()).toEqual([]);
  });
});
