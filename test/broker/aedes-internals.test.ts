import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, it, expect } from 'vitest';
import mqtt from 'mqtt';
import { Aedes, type Client, type PublishPacket } from 'aedes';
import memoryPersistence from 'aedes-persistence';
import {
  AEDES_VERSION_EXPECTED,
  assertAedesInternals,
  clientOf,
  encodePublishQos1,
  parserOf,
  routeOnlyUnconsumed,
  sessionStoreOf,
  subscribedTo,
  writeQos1Direct,
} from '#broker/aedes-internals';

/** An Aedes on a free port, with a connected client id `probe`. */
async function brokerWithClient(options: ConstructorParameters<typeof Aedes>[0] = {}) {
  const aedes = await Aedes.createBroker(options);
  let handled: Client | undefined;
  const server = net.createServer((socket) => {
    handled = aedes.handle(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = await mqtt.connectAsync(url, { clientId: 'probe', clean: false, reconnectPeriod: 0 });
  return {
    aedes,
    url,
    client,
    handled: () => handled!,
    async close() {
      await client.endAsync(true);
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The broker reaches into Aedes where its typings declare nothing (broker/src/aedes-internals.ts).
 * An Aedes upgrade that moves any of these must fail here and at start, not silently unguard the broker.
 */
describe('Aedes internals the broker relies on', () => {
  it('is the aedes release the reaches were written for', async () => {
    const aedes = await Aedes.createBroker();
    try {
      expect((aedes as unknown as { version: string }).version).toBe(AEDES_VERSION_EXPECTED);
      expect(() => assertAedesInternals(aedes)).not.toThrow();
    } finally {
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
    }
  });

  it('exposes the connection parser, the client map and the session store', async () => {
    const b = await brokerWithClient();
    const seen: string[] = [];
    try {
      const parser = parserOf(b.handled());
      expect(typeof parser?.parse).toBe('function');
      parser!.prependListener('packet', (packet) => seen.push(packet.cmd));
      await b.client.subscribeAsync('x/y', { qos: 1 });
      expect(seen).toContain('subscribe');
      expect(clientOf(b.aedes, 'probe')).toBe(b.handled());
      const store = sessionStoreOf(b.aedes);
      expect(await store.subscriptionsByClient({ id: 'probe' })).toEqual([
        expect.objectContaining({ topic: 'x/y', qos: 1 }),
      ]);
      await store.removeSubscriptions({ id: 'probe' }, ['x/y']);
      expect(await store.subscriptionsByClient({ id: 'probe' })).toEqual([]);
      await store.addSubscriptions({ id: 'probe' }, [{ topic: 'x/z', qos: 0 }]);
      await store.cleanSubscriptions({ id: 'probe' });
      const queued: PublishPacket[] = [];
      for await (const packet of store.outgoingStream({ id: 'probe' })) queued.push(packet);
      expect(queued).toEqual([]);
    } finally {
      await b.close();
    }
  });

  it('routes client publishes through the three-argument publish, so consumed ones can skip routing', async () => {
    const b = await brokerWithClient();
    const listener = await mqtt.connectAsync(b.url, { clientId: 'listener', reconnectPeriod: 0 });
    try {
      const consumedTopics: string[] = [];
      routeOnlyUnconsumed(b.aedes, (packet) => {
        if (packet.topic !== 'reports/x') return false;
        consumedTopics.push(packet.topic);
        return true;
      });
      const received: string[] = [];
      listener.on('message', (topic) => received.push(topic));
      await listener.subscribeAsync(['reports/x', 'commands/x'], { qos: 1 });
      // Both acknowledged (QoS 1 resolves on PUBACK); only the unconsumed one is routed.
      await b.client.publishAsync('reports/x', 'r', { qos: 1 });
      await b.client.publishAsync('commands/x', 'c', { qos: 1 });
      // The service's own publishes (two-argument form) are always routed.
      await new Promise<void>((resolve, reject) =>
        b.aedes.publish(
          { cmd: 'publish', topic: 'reports/x', payload: Buffer.from('s'), qos: 0, retain: false, dup: false },
          (err) => (err ? reject(err) : resolve()),
        ),
      );
      await expect.poll(() => received.sort()).toEqual(['commands/x', 'reports/x']);
      expect(consumedTopics).toEqual(['reports/x']);
    } finally {
      await listener.endAsync(true);
      await b.close();
    }
  });

  it('writes a QoS 1 message straight to one connection: delivered and acknowledged, stored nowhere, ids shared with Aedes', async () => {
    const b = await brokerWithClient();
    try {
      await b.client.subscribeAsync(['secret/x', 'commands/x'], { qos: 1 });
      expect(subscribedTo(b.handled(), 'secret/x')).toBe(true);
      expect(subscribedTo(b.handled(), 'secret/y')).toBe(false);
      const received: Array<{ topic: string; payload: string; qos: number; retain: boolean; messageId?: number }> = [];
      b.client.on('message', (topic, payload, packet) =>
        received.push({
          topic,
          payload: payload.toString(),
          qos: packet.qos,
          retain: packet.retain,
          messageId: packet.messageId,
        }),
      );
      const acks: number[] = [];
      b.client.on('packetsend', (packet) => packet.cmd === 'puback' && acks.push(packet.messageId!));
      // Longer than 127 bytes: a remaining length of two bytes.
      const payload = Buffer.from('s'.repeat(300));
      expect(writeQos1Direct(b.handled(), { topic: 'secret/x', payload })).toBe(true);
      // A routed QoS 1 command right after: its packet id follows the direct one's.
      await new Promise<void>((resolve, reject) =>
        b.aedes.publish(
          { cmd: 'publish', topic: 'commands/x', payload: Buffer.from('c'), qos: 1, retain: false, dup: false },
          (err) => (err ? reject(err) : resolve()),
        ),
      );
      await expect.poll(() => received.length).toBe(2);
      expect(received[0]).toMatchObject({ topic: 'secret/x', payload: payload.toString(), qos: 1, retain: false });
      expect(received[1]!.messageId).not.toBe(received[0]!.messageId);
      await expect.poll(() => acks.length).toBe(2);
      // Nothing of it in the session store (the routed command's entry is gone with its PUBACK).
      const queued: PublishPacket[] = [];
      for await (const packet of sessionStoreOf(b.aedes).outgoingStream({ id: 'probe' })) queued.push(packet);
      expect(queued.map((p) => p.topic)).not.toContain('secret/x');
      expect(encodePublishQos1('a', 7, Buffer.from('b'))).toEqual(Buffer.from([0x32, 6, 0, 1, 0x61, 0, 7, 0x62]));
    } finally {
      await b.close();
    }
  });

  it('refuses to start on a store or a publish of another shape, naming the aedes version', async () => {
    const persistence = memoryPersistence() as unknown as Record<string, unknown>;
    // Shadows the prototype's method, as a store that dropped the call would look.
    persistence.outgoingClearMessageId = undefined;
    const aedes = await Aedes.createBroker({ persistence: persistence as never });
    try {
      expect(() => assertAedesInternals(aedes)).toThrow(
        /^aedes 1\.2\.0 does not have .*aedes\.persistence\.outgoingClearMessageId\(\)/,
      );
      (aedes as unknown as { publish: unknown }).publish = (packet: unknown, done: unknown) => [packet, done];
      expect(() => assertAedesInternals(aedes)).toThrow(/aedes\.publish\(packet, client, done\)/);
    } finally {
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
    }
  });

  it('refuses cluster backends without the emitter and store calls the cluster glue wraps', async () => {
    const aedes = await Aedes.createBroker();
    try {
      expect(() => assertAedesInternals(aedes, { mq: {}, persistence: {} })).toThrow(
        /mqemitter-redis _emit\(\) and state, mqemitter-redis _close\(\) and closed, aedes-persistence-redis addSubscriptions\(\)/,
      );
    } finally {
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
    }
  });
});
