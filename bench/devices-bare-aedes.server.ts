import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Aedes } from 'aedes';
import { LISTEN_BACKLOG } from '../api/src/listen-backlog';

/**
 * The baseline of bench/devices-gateway.bench.ts: Aedes 1.2 with no hooks and no database, in
 * its own process (started with --expose-gc), counting heartbeat publishes. Driven over IPC.
 */
const aedes = await Aedes.createBroker();
let heartbeats = 0;
aedes.on('publish', (packet, client) => {
  if (client && packet.topic.endsWith('/heartbeat')) heartbeats += 1;
});
const server = net.createServer(aedes.handle);
// The same accept queue as our broker: the ramp compares broker work, not kernel queue sizes.
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', LISTEN_BACKLOG, resolve));
process.on('message', (raw) => {
  const msg = raw as { id: number; cmd: 'stats' | 'gc' | 'stop' };
  if (msg.cmd === 'gc') (globalThis as { gc?: () => void }).gc?.();
  process.send?.({
    id: msg.id,
    heartbeats,
    connected: aedes.connectedClients,
    memory: process.memoryUsage(),
    cpu: process.cpuUsage(),
  });
  if (msg.cmd === 'stop') aedes.close(() => server.close(() => process.exit(0)));
});
process.send?.({ ready: true, port: (server.address() as AddressInfo).port });
