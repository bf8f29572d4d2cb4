import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import path from 'node:path';
import { readdirSync, readlinkSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { startTestServer, type TestAccount, type TestServer } from '../helpers/test-server';
import { buildModel } from '../helpers/factories';
import { uploadFirmware } from '../ota/ota-helpers';
import { ifStarted } from '../helpers/teardown';
import { STALE_TEMP_AGE_MS } from '#core/firmware/firmware-storage';

const BOUNDARY = 'cut-upload-7d1f0c';

/** The start of a firmware form: the text fields, then a file part whose bytes never end (no closing boundary). */
function formCutInFile(fileField: string, fileBytes: Buffer): Buffer {
  const field = (name: string, value: string) =>
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  return Buffer.concat([
    Buffer.from(
      field('model', 'LX-200') +
        field('version', '9.9.9') +
        field('release_notes', 'cut off') +
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${fileField}"; filename="fw.bin"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n',
    ),
    fileBytes,
  ]);
}

function requestHead(server: TestServer, account: TestAccount, contentLength: number): string {
  return (
    'POST /api/v1/firmware/versions HTTP/1.1\r\n' +
    `Host: 127.0.0.1:${server.service.httpPort}\r\n` +
    `Authorization: Bearer ${account.apiKey}\r\n` +
    `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
    `Content-Length: ${contentLength}\r\n` +
    'Connection: close\r\n\r\n'
  );
}

/** Sends the whole (cut) body as declared and reads the answer until the server closes. */
function sendRaw(
  server: TestServer,
  account: TestAccount,
  body: Buffer,
): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(server.service.httpPort, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk) => received.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(received).toString('utf8');
      const [head = '', rest = ''] = text.split('\r\n\r\n', 2);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, body: rest });
    });
    // One write: the cut form's end reaches the parser while the file part was only just handed on.
    socket.write(Buffer.concat([Buffer.from(requestHead(server, account, body.length)), body]));
  });
}

const firmwareDir = (server: TestServer) => path.join(server.config.dataDir, 'firmware');

function tempFiles(server: TestServer): string[] {
  try {
    return readdirSync(firmwareDir(server)).filter((name) => name.startsWith('.tmp-'));
  } catch {
    return [];
  }
}

/** Descriptors of this process (the server runs in it) that point at an upload's temp file, removed or not. */
function openTempDescriptors(server: TestServer): string[] {
  if (process.platform !== 'linux') return [];
  const prefix = path.join(firmwareDir(server), '.tmp-');
  const open: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(prefix)) open.push(target);
    } catch {
      // closed between the listing and the read
    }
  }
  return open;
}

describe('firmware uploads cut off or aborted: a 4xx or a closed connection, never a crash or a leftover file', () => {
  let server: TestServer;
  let account: TestAccount;
  // The server runs in this process: an 'error' event nobody listens to would end a real one.
  const uncaught: string[] = [];
  const onUncaught = (error: Error) => uncaught.push(error.message);

  beforeAll(async () => {
    server = await startTestServer({ env: { MAX_FIRMWARE_BYTES: String(64 * 1024) } });
    account = await server.createAccount();
    await server.service.services.apiKeys.setRateLimit(account.apiKeyId, 1_000_000);
    await buildModel(account, 'LX-200');
    process.on('uncaughtException', onUncaught);
  }, 60_000);
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await ifStarted(server)?.close();
  });

  /** The process lives and answers; no temp file (or descriptor of one) is left beyond those in `before`. */
  async function expectAliveAndClean(before: string[] = []): Promise<void> {
    expect(uncaught.splice(0)).toEqual([]);
    expect((await account.api.get('/healthz')).status).toBe(200);
    const left = (names: string[]) => names.filter((name) => !before.some((old) => name.includes(old)));
    await expect.poll(() => left(tempFiles(server))).toEqual([]);
    await expect.poll(() => left(openTempDescriptors(server))).toEqual([]);
  }

  // 1 KB fits the parser's buffer (the end of the form follows at once), 40 KB holds it back
  // until the file is being written.
  it.each([
    ['file', 1_000, 400],
    ['file', 40_000, 400],
    ['firmware', 1_000, 422],
    ['firmware', 40_000, 422],
  ])(
    'answers a form whose "%s" file part (%i bytes) never gets its closing boundary with %i problem+json',
    async (fileField, size, status) => {
      const res = await sendRaw(server, account, formCutInFile(fileField, randomBytes(size)));
      expect(res.status, res.head).toBe(status);
      expect(res.head.toLowerCase()).toContain('content-type: application/problem+json');
      await expectAliveAndClean();
    },
  );

  it('answers a form with a malformed part header before its file part with 400, and writes no file', async () => {
    // busboy gives the form up at the bad header and still hands over the file part after it;
    // that write was awaited by nobody and left its temp file and descriptor (found by test/fuzz).
    const body = Buffer.from(
      `--${BOUNDARY}\r\nnonsense\r\n\r\nv\r\n` +
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="fw.bin"\r\n\r\n` +
        `${'a'.repeat(70_000)}\r\n--${BOUNDARY}--\r\n`,
    );
    const res = await sendRaw(server, account, body);
    expect(res.status, res.head).toBe(400);
    await expectAliveAndClean();
  });

  it('removes the temp file and closes its descriptor when the client goes away in the middle of the file', async () => {
    const start = formCutInFile('file', randomBytes(10_000));
    const socket = net.connect(server.service.httpPort, '127.0.0.1');
    socket.on('error', () => undefined);
    // 50 KB more are promised than ever come: the server is still receiving when the client leaves.
    socket.write(requestHead(server, account, start.length + 50_000));
    socket.write(start);
    await expect.poll(() => tempFiles(server).length).toBe(1);
    socket.destroy();
    await expectAliveAndClean();
  });

  it('still stores a whole upload afterwards, and leaves no temp file after a refused one', async () => {
    const before = tempFiles(server);
    await uploadFirmware(account, { model: 'LX-200', version: '1.0.0', expectStatus: 201 });
    await uploadFirmware(account, { model: 'LX-200', version: '1.0.0', expectStatus: 409 });
    await uploadFirmware(account, { model: 'LX-200', version: '2.0.0', bytes: randomBytes(70_000), expectStatus: 413 });
    await expectAliveAndClean(before);
  });

  it('removes at start the temp files a process died with, older than STALE_TEMP_AGE_MS, and keeps younger ones', async () => {
    // As a process killed during uploads leaves them: one long ago, one another process sharing
    // the folder may still be writing.
    const dead = `.tmp-${randomUUID()}`;
    const young = `.tmp-${randomUUID()}`;
    const past = (Date.now() - STALE_TEMP_AGE_MS - 10 * 60_000) / 1000;
    writeFileSync(path.join(firmwareDir(server), dead), randomBytes(1000));
    utimesSync(path.join(firmwareDir(server), dead), past, past);
    writeFileSync(path.join(firmwareDir(server), young), randomBytes(1000));

    await server.restart();

    expect(tempFiles(server)).toEqual([young]);
    rmSync(path.join(firmwareDir(server), young));
    expect((await account.api.get('/healthz')).status).toBe(200);
  });
});
