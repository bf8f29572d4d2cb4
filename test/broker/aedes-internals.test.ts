import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, it, expect } from 'vitest';
import mqtt from 'mqtt';
import { Aedes, type Client } from 'aedes';
import { clientOf, parserOf, persistenceOf } from '../../broker/src/aedes-internals';

/**
 * The broker reaches into Aedes where its typings declare nothing (broker/src/aedes-internals.ts).
 * An Aedes upgrade that moves any of these must fail here, not silently unguard the broker.
 */
describe('Aedes internals the broker relies on', () => {
  it('exposes the connection parser, the client map and the session store', async () => {
    const aedes = await Aedes.createBroker();
    let handled: Client | undefined;
    const server = net.createServer((socket) => {
      handled = aedes.handle(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const seen: string[] = [];
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`, { clientId: 'probe', reconnectPeriod: 0 });
    try {
      const parser = parserOf(handled!);
      expect(typeof parser?.parse).toBe('function');
      parser!.prependListener('packet', (packet) => seen.push(packet.cmd));
      await client.subscribeAsync('x/y', { qos: 1 });
      expect(seen).toContain('subscribe');
      expect(clientOf(aedes, 'probe')).toBe(handled);
      const store = persistenceOf(aedes) as Record<string, unknown>;
      for (const call of ['addSubscriptions', 'removeSubscriptions', 'subscriptionsByClient', 'cleanSubscriptions', 'outgoingStream', 'outgoingClearMessageId']) {
        expect(typeof store[call], call).toBe('function');
      }
    } finally {
      await client.endAsync(true);
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
