import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import net from 'node:net';
import { startTestServer, type TestServer } from '../helpers/test-server';
import { ifStarted } from '../helpers/teardown';

/**
 * Raw MQTT abuse (Mosquitto's and Paho's conformance cases): garbage bytes, bad client ids,
 * invalid UTF-8, Will QoS 3, oversized remaining length. Each is refused or dropped, and the
 * broker keeps answering a fresh CONNECT afterwards.
 */
const utf8 = (s: string | Buffer): Buffer => {
  const b = typeof s === 'string' ? Buffer.from(s, 'utf8') : s;
  const len = Buffer.alloc(2);
  len.writeUInt16BE(b.length);
  return Buffer.concat([len, b]);
};
const remainingLength = (n: number): Buffer => {
  const out: number[] = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    out.push(byte);
  } while (n > 0);
  return Buffer.from(out);
};

function connectPacket(opts: {
  clientId: string | Buffer;
  flags?: number;
  username?: string;
  password?: string;
  will?: { topic: string; payload: string };
}): Buffer {
  let flags = opts.flags ?? 0x02; // clean session
  const payload: Buffer[] = [utf8(opts.clientId)];
  if (opts.will) payload.push(utf8(opts.will.topic), utf8(opts.will.payload));
  if (opts.username !== undefined) {
    flags |= 0x80;
    payload.push(utf8(opts.username));
  }
  if (opts.password !== undefined) {
    flags |= 0x40;
    payload.push(utf8(opts.password));
  }
  const variable = Buffer.concat([utf8('MQTT'), Buffer.from([0x04, flags, 0x00, 0x1e])]);
  const body = Buffer.concat([variable, ...payload]);
  return Buffer.concat([Buffer.from([0x10]), remainingLength(body.length), body]);
}

/** Sends bytes and resolves with what came back before the socket closed (or the timeout). */
function exchange(port: number, bytes: Buffer, waitMs = 1500): Promise<{ data: Buffer; closed: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ data: Buffer.concat(chunks), closed });
    };
    const timer = setTimeout(() => done(false), waitMs);
    socket.on('data', (d) => chunks.push(d));
    socket.on('close', () => done(true));
    socket.on('error', () => undefined);
  });
}

/** CONNACK return code (0 = accepted), or null when none came. */
const connackCode = (data: Buffer): number | null => (data.length >= 4 && data[0] === 0x20 ? data[3]! : null);

describe('raw MQTT abuse never crashes the broker', () => {
  let server: TestServer;
  let port: number;

  beforeAll(async () => {
    server = await startTestServer();
    port = server.service.mqttPort!;
  });
  afterAll(async () => ifStarted(server)?.close());

  const brokerStillAnswers = async () => {
    const res = await exchange(
      port,
      connectPacket({ clientId: 'NOT-CLAIMED-1', username: 'NOT-CLAIMED-1', password: 'x' }),
    );
    const code = connackCode(res.data);
    // Refused (bad credentials / not authorized / identifier rejected) but answered with a CONNACK:
    // a dead broker gives no CONNACK at all.
    expect([2, 4, 5]).toContain(code);
  };

  it('has a broker that answers a CONNACK', async () => {
    expect(port).toBeGreaterThan(0);
    await brokerStillAnswers();
  });

  it.each([
    ['random garbage', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
    ['zero bytes', Buffer.alloc(64)],
    ['oversized remaining length', Buffer.from([0x10, 0xff, 0xff, 0xff, 0xff, 0x7f])],
    ['remaining length past the data', Buffer.from([0x10, 0xff, 0xff, 0x03, 0x00, 0x04])],
    ['PUBLISH before CONNECT', Buffer.from([0x30, 0x05, 0x00, 0x01, 0x61, 0x62, 0x63])],
  ])('drops %s', async (_label, bytes) => {
    const res = await exchange(port, bytes);
    expect(connackCode(res.data) ?? 1).not.toBe(0);
    await brokerStillAnswers();
  });

  it('refuses an empty client id with a persistent session', async () => {
    const res = await exchange(port, connectPacket({ clientId: '', flags: 0x00, username: '', password: 'x' }));
    expect(connackCode(res.data) ?? -1).not.toBe(0);
    await brokerStillAnswers();
  });

  it('refuses client ids with control characters or invalid UTF-8', async () => {
    for (const clientId of ['DEV\u0001ICE', Buffer.from([0xc3, 0x28, 0xa0, 0xa1]), 'A\u0000B']) {
      const res = await exchange(port, connectPacket({ clientId, username: 'x', password: 'y' }));
      expect(connackCode(res.data) ?? -1).not.toBe(0);
    }
    await brokerStillAnswers();
  });

  it('refuses a Will with QoS 3', async () => {
    const flags = 0x02 | 0x04 | 0x18; // clean, will flag, will QoS bits = 3
    const res = await exchange(
      port,
      connectPacket({
        clientId: 'WILL-3',
        flags,
        will: { topic: 'devices/WILL-3/status', payload: '{}' },
        username: 'WILL-3',
        password: 'x',
      }),
    );
    expect(connackCode(res.data) ?? -1).not.toBe(0);
    await brokerStillAnswers();
  });

  it('survives 200 connections of garbage at once', async () => {
    await Promise.all(
      Array.from({ length: 200 }, (_, i) => exchange(port, Buffer.from([0x10 + (i % 16), 0xff, i & 0xff, 0x00]), 500)),
    );
    await brokerStillAnswers();
    expect((await fetch(`${server.service.httpUrl}/healthz`)).status).toBe(200);
  });
});
