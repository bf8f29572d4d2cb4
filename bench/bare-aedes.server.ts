import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { Aedes } from 'aedes';
import { LISTEN_BACKLOG } from '../api/src/listen-backlog';

/**
 * The baseline the gateway and connection benchmarks compare the service with: Aedes 1.2 with
 * no hooks and no database, in its own process (started with --expose-gc), counting heartbeat
 * publishes. With BARE_AEDES_TLS_CERT/KEY it listens behind node:tls with the same protocol floor
 * and client-certificate request as the service's MQTTS listener. BARE_AEDES_PORT fixes the port
 * (a restart comes back on the same one). Driven over IPC by bench/lib/bare-aedes.ts.
 */
const aedes = await Aedes.createBroker();
let heartbeats = 0;
aedes.on('publish', (packet, client) => {
  if (client && packet.topic.endsWith('/heartbeat')) heartbeats += 1;
});
const certFile = process.env.BARE_AEDES_TLS_CERT;
const keyFile = process.env.BARE_AEDES_TLS_KEY;
const server =
  certFile && keyFile
    ? tls.createServer(
        {
          cert: fs.readFileSync(certFile),
          key: fs.readFileSync(keyFile),
          minVersion: 'TLSv1.2',
          requestCert: true,
          rejectUnauthorized: false,
        },
        (socket) => aedes.handle(socket),
      )
    : net.createServer(aedes.handle);
server.on('tlsClientError', () => undefined);
// The same accept queue as our broker: the ramp compares broker work, not kernel queue sizes.
await new Promise<void>((resolve) =>
  server.listen(Number(process.env.BARE_AEDES_PORT ?? 0), '127.0.0.1', LISTEN_BACKLOG, resolve),
);
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
