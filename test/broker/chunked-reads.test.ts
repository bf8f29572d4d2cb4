import type { Duplex } from 'node:stream';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { MqttClient } from 'mqtt';
import { topics } from '#protocol/topics';
import { duplexPair, startMemoryBroker, type MemoryBroker } from '../helpers/memory-broker';
import { heartbeat } from '../helpers/mqtt';

/**
 * Node 26's `readable.read()` without a size returns one buffered chunk, not all of them
 * (nodejs/node#60441). This makes any Node read that way, so the test means the same on Node 20
 * to 26: what a stream hands the broker is one chunk per unsized read, however many are buffered.
 */
function oneChunkPerUnsizedRead(stream: Duplex): void {
  const sizes: number[] = [];
  const push = stream.push.bind(stream);
  stream.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
    if (Buffer.isBuffer(chunk) && chunk.length > 0) sizes.push(chunk.length);
    return push(chunk, encoding);
  };
  const read = stream.read.bind(stream);
  const consumed = (bytes: number) => {
    let left = bytes;
    while (left > 0 && sizes.length > 0) {
      const first = sizes[0]!;
      if (first <= left) {
        left -= first;
        sizes.shift();
      } else {
        sizes[0] = first - left;
        left = 0;
      }
    }
  };
  stream.read = (size?: number): unknown => {
    const wanted = size ?? sizes[0];
    const out = (wanted === undefined ? read() : read(wanted)) as Buffer | null;
    if (out) consumed(out.length);
    return out;
  };
}

describe('MQTT packets that arrive in several chunks at once', () => {
  let mem: MemoryBroker;
  beforeAll(async () => {
    mem = await startMemoryBroker({ 'SN-CHUNKS': 'pw-chunks' });
  });
  afterAll(async () => {
    await mem.close();
  });

  it('are all read: the CONNECT is answered and a SUBSCRIBE and a PUBLISH right after it are handled', async () => {
    // mqtt.js writes a CONNECT in several pieces; over a WebSocket each is a frame of its own.
    const client = new MqttClient(
      () => {
        const [device, service] = duplexPair();
        oneChunkPerUnsizedRead(service);
        mem.broker.acceptStream(service);
        return device;
      },
      {
        clientId: 'SN-CHUNKS',
        username: 'SN-CHUNKS',
        password: 'pw-chunks',
        clean: true,
        reconnectPeriod: 0,
        connectTimeout: 3_000,
        protocolVersion: 4,
      },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        client.once('connect', () => resolve());
        client.once('error', reject);
      });
      const granted = await client.subscribeAsync(topics.ota('SN-CHUNKS'), { qos: 1 });
      expect(granted.map((g) => g.qos)).toEqual([1]);
      await client.publishAsync(topics.heartbeat('SN-CHUNKS'), heartbeat(), { qos: 1 });
      await expect.poll(() => mem.heard.filter((h) => h.startsWith('heartbeat SN-CHUNKS')).length).toBe(1);
    } finally {
      await client.endAsync(true);
    }
  });
});
