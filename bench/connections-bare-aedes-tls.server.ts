import fs from 'node:fs';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { Aedes } from 'aedes';
import { LISTEN_BACKLOG } from '../api/src/listen-backlog';

/**
 * The baseline of bench/connections-tls.bench.ts: Aedes 1.2 with no hooks and no database,
 * behind node:tls with the same certificate, protocol floor and client-certificate request as
 * the service's MQTTS listener, in its own process. Driven over IPC.
 */
const [certFile, keyFile] = [process.env.TLS_CERT_FILE!, process.env.TLS_KEY_FILE!];
const aedes = await Aedes.createBroker();
const server = tls.createServer(
  {
    cert: fs.readFileSync(certFile),
    key: fs.readFileSync(keyFile),
    minVersion: 'TLSv1.2',
    requestCert: true,
    rejectUnauthorized: false,
  },
  (socket) => aedes.handle(socket),
);
server.on('tlsClientError', () => undefined);
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', LISTEN_BACKLOG, resolve));
process.on('message', (raw) => {
  const msg = raw as { id: number; cmd: 'stats' | 'stop' };
  process.send?.({ id: msg.id, connected: aedes.connectedClients, cpu: process.cpuUsage() });
  if (msg.cmd === 'stop') aedes.close(() => server.close(() => process.exit(0)));
});
process.send?.({ ready: true, port: (server.address() as AddressInfo).port });
