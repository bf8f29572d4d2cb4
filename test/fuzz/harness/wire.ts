import http from 'node:http';
import net from 'node:net';
import { randomBytes } from 'node:crypto';

/** What one raw connection saw: the bytes the server wrote and how the connection ended. */
export interface Exchange {
  data: Buffer;
  /** `closed`: the server closed (or reset) the connection; `timeout`: it kept it open. */
  end: 'closed' | 'timeout';
  error: string | undefined;
  /** Our side's port: the server's socket for this connection has it as its remote port. */
  localPort: number | undefined;
}

export interface ExchangeOptions {
  /**
   * After writing: half-close at once (`end`, the default); half-close once the server has been
   * quiet for `idleMs` (`end-when-idle`: a client that waits for the answer, then gives up); drop
   * the connection (`destroy`); or do neither.
   */
  after?: 'end' | 'end-when-idle' | 'destroy' | 'none';
  idleMs?: number;
  /** How long the server may keep the connection open after we are done (ms). */
  timeoutMs?: number;
  /** Write `first`, wait until `ready(data)` says the answer to it arrived, then write `rest`. */
  rest?: Buffer[];
  ready?: (data: Buffer) => boolean;
  /** Pause after writing `rest` before `after` (lets the server act on an open session). */
  settleMs?: number;
}

/** Sends bytes over a new TCP connection and collects everything until the server closes it. */
export function exchange(port: number, first: Buffer, options: ExchangeOptions = {}): Promise<Exchange> {
  const { after = 'end', idleMs = 300, timeoutMs = 10_000, rest = [], ready, settleMs = 0 } = options;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    let localPort: number | undefined;
    let done = false;
    let restSent = false;
    let fallback: NodeJS.Timeout | undefined;
    let settle: NodeJS.Timeout | undefined;
    let idle: NodeJS.Timeout | undefined;
    const socket = net.connect({ port, host: '127.0.0.1' });
    const finish = (end: Exchange['end']) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(fallback);
      clearTimeout(settle);
      clearTimeout(idle);
      socket.destroy();
      resolve({ data: Buffer.concat(chunks), end, error, localPort });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs + settleMs + (ready ? 1500 : 0));
    let waiting = false;
    const quiet = () => {
      clearTimeout(idle);
      idle = setTimeout(() => socket.end(), idleMs);
    };
    const wrapUp = () => {
      if (done) return;
      if (after === 'end') socket.end();
      else if (after === 'end-when-idle') {
        waiting = true;
        quiet();
      }
      // Drop the connection once our bytes are out, without waiting for any answer.
      else if (after === 'destroy') socket.end(() => finish('closed'));
    };
    const sendRest = () => {
      if (restSent || done) return;
      restSent = true;
      for (const chunk of rest) socket.write(chunk);
      if (settleMs > 0) settle = setTimeout(wrapUp, settleMs);
      else wrapUp();
    };
    socket.on('connect', () => {
      localPort = socket.localPort;
      socket.write(first);
      // Without an answer to `first`, still send the rest (and close) after a while.
      if (ready) fallback = setTimeout(sendRest, 1500);
      else sendRest();
    });
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      if (waiting) quiet();
      if (!restSent && ready?.(Buffer.concat(chunks))) sendRest();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    // The server ended its side: whatever it had to say is said.
    socket.on('end', () => finish('closed'));
    socket.on('close', () => finish('closed'));
  });
}

export interface HttpAnswer {
  status: number | null;
  headers: Record<string, string>;
  body: string;
  /** Every status line in the answer (pipelined or "100 Continue" answers give several). */
  statuses: number[];
  raw: string;
}

/** Reads the first answer of a raw HTTP exchange (status, headers, de-chunked body). */
export function parseHttp(data: Buffer): HttpAnswer {
  const raw = data.toString('latin1');
  const statuses = [...raw.matchAll(/(?:^|\r\n)HTTP\/\d\.\d (\d{3})/g)].map((m) => Number(m[1]));
  let text = raw;
  // Skip interim answers (100 Continue) to the real one.
  while (/^HTTP\/\d\.\d 1\d\d /.test(text) && text.includes('\r\n\r\n') && !/^HTTP\/\d\.\d 101 /.test(text))
    text = text.slice(text.indexOf('\r\n\r\n') + 4);
  const m = /^HTTP\/\d\.\d (\d{3})/.exec(text);
  const headerEnd = text.indexOf('\r\n\r\n');
  const headers: Record<string, string> = {};
  const head = headerEnd >= 0 ? text.slice(0, headerEnd) : text;
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = headerEnd >= 0 ? text.slice(headerEnd + 4) : '';
  if ((headers['transfer-encoding'] ?? '').includes('chunked')) body = dechunk(body);
  return { status: m ? Number(m[1]) : null, headers, body, statuses, raw };
}

function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    if (eol < 0) return out + rest;
    const size = parseInt(rest.slice(0, eol), 16);
    if (!Number.isFinite(size) || size === 0) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

/** One HTTP request over a connection of its own that is closed after the answer. */
export function request(
  port: number,
  input: { method: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
  timeoutMs = 10_000,
): Promise<{
  status: number | null;
  headers: http.IncomingHttpHeaders;
  body: string;
  error?: string;
  localPort?: number;
}> {
  return new Promise((resolve) => {
    let localPort: number | undefined;
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: input.method,
        path: input.path,
        agent: false,
        headers: { connection: 'close', ...input.headers },
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? null,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
            localPort,
          }),
        );
        res.on('error', (e) =>
          resolve({ status: res.statusCode ?? null, headers: res.headers, body: '', error: e.message, localPort }),
        );
      },
    );
    req.on('socket', (s) => s.on('connect', () => (localPort = s.localPort)));
    req.on('error', (e: NodeJS.ErrnoException) =>
      resolve({ status: null, headers: {}, body: '', error: e.code ?? e.message, localPort }),
    );
    req.end(input.body);
  });
}

/** A client-to-server WebSocket frame (masked, as RFC 6455 requires of clients). */
export function wsFrame(payload: Buffer, opcode = 1, fin = true): Buffer {
  const mask = randomBytes(4);
  const len = payload.length;
  const head: number[] = [(fin ? 0x80 : 0) | (opcode & 0x0f)];
  if (len < 126) head.push(0x80 | len);
  else if (len < 65536) head.push(0x80 | 126, len >> 8, len & 0xff);
  else {
    head.push(0x80 | 127, 0, 0, 0, 0);
    head.push((len >>> 24) & 0xff, (len >>> 16) & 0xff, (len >>> 8) & 0xff, len & 0xff);
  }
  const masked = Buffer.alloc(len);
  for (let i = 0; i < len; i++) masked[i] = payload[i]! ^ mask[i % 4]!;
  return Buffer.concat([Buffer.from(head), mask, masked]);
}

/**
 * The payload bytes of the server's WebSocket frames after the handshake answer, joined (a
 * server may send one MQTT packet over several frames). Stops at a frame not fully received.
 */
export function wsPayloads(data: Buffer): Buffer {
  const start = data.indexOf('\r\n\r\n');
  if (start < 0) return Buffer.alloc(0);
  const parts: Buffer[] = [];
  let i = start + 4;
  while (i + 2 <= data.length) {
    let len = data[i + 1]! & 0x7f;
    let at = i + 2;
    if (len === 126) {
      if (at + 2 > data.length) break;
      len = data.readUInt16BE(at);
      at += 2;
    } else if (len === 127) {
      if (at + 8 > data.length) break;
      len = Number(data.readBigUInt64BE(at));
      at += 8;
    }
    if ((data[i + 1]! & 0x80) !== 0) at += 4; // a masked frame (not from a server, but be lenient)
    if (at + len > data.length) break;
    if ((data[i]! & 0x0f) <= 2) parts.push(data.subarray(at, at + len));
    i = at + len;
  }
  return Buffer.concat(parts);
}

/**
 * What the fuzzed cases aim at besides the account: the model LX-200 and these devices of it,
 * made through the API with the account's admin key. Answers each device's MQTT password.
 */
export async function seedDevices(
  service: { httpPort: number; apiKey: string },
  serials: string[],
): Promise<Array<{ serial: string; password: string }>> {
  const headers = { authorization: `Bearer ${service.apiKey}`, 'content-type': 'application/json' };
  const model = await request(service.httpPort, {
    method: 'POST',
    path: '/api/v1/models',
    headers,
    body: JSON.stringify({ name: 'LX-200' }),
  });
  if (model.status !== 201) throw new Error(`the model was not created: ${model.status} ${model.body}`);
  if (serials.length === 0) return [];
  const claim = await request(service.httpPort, {
    method: 'POST',
    path: '/api/v1/devices/claim',
    headers,
    body: JSON.stringify({ serials, model: 'LX-200' }),
  });
  if (claim.status !== 201) throw new Error(`the devices were not claimed: ${claim.status} ${claim.body}`);
  const claimed = JSON.parse(claim.body) as { devices: Array<{ serial: string; credentials: { password: string } }> };
  return claimed.devices.map((d) => ({ serial: d.serial, password: d.credentials.password }));
}
