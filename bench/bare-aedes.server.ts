import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { Aedes } from 'aedes';
import { randomBytes, randomUUID } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { LISTEN_BACKLOG } from '#core/listen-backlog';
import { topics } from '#protocol/topics';

/**
 * The baseline the gateway and connection benchmarks compare the service with: Aedes 1.2 with
 * no hooks and no database, in its own process (started with --expose-gc), counting heartbeat
 * publishes. With BARE_AEDES_TLS_CERT/KEY it listens behind node:tls with the same protocol floor
 * and client-certificate request as the service's MQTTS listener. BARE_AEDES_PORT fixes the port
 * (a restart comes back on the same one). Driven over IPC by bench/lib/bare-aedes.ts.
 * `publishOta` publishes one OTA command (QoS 1, the size and shape of the service's) to each
 * serial, at most PUBLISH_WINDOW unconfirmed at a time, and answers once Aedes confirmed them all:
 * the floor of what an OTA command costs a broker (bench/ota.bench.ts).
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
const PUBLISH_WINDOW = 1000;

/** A command like the service's: a fresh job id, a signed download link, the image's digest and size. */
function otaCommand(): Buffer {
  const jobId = randomUUID();
  const expires = Math.floor(Date.now() / 1000) + 3600;
  return Buffer.from(
    JSON.stringify({
      job_id: jobId,
      version: '1.1.0',
      url: `http://127.0.0.1:8080/api/v1/firmware/download/${jobId}?expires=${expires}&sig=${randomBytes(32).toString('hex')}`,
      sha256: randomBytes(32).toString('hex'),
      size: 65536,
    }),
  );
}

async function publishOta(serials: string[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < serials.length) {
      const serial = serials[next++]!;
      await new Promise<void>((resolve) =>
        aedes.publish(
          { cmd: 'publish', topic: topics.ota(serial), payload: otaCommand(), qos: 1, retain: false, dup: false },
          () => resolve(),
        ),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(PUBLISH_WINDOW, serials.length) }, worker));
}

/** A CPU profile of one phase, as bench/lib/server-child.ts takes of the service (same sampling). */
let profiler: Session | undefined;
async function profile(action: 'profileStart' | 'profileStop', file?: string): Promise<void> {
  if (action === 'profileStart') {
    profiler = new Session();
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.setSamplingInterval', { interval: 100 });
    await profiler.post('Profiler.start');
    return;
  }
  if (!profiler || !file) throw new Error('no profile was started');
  const { profile: taken } = await profiler.post('Profiler.stop');
  fs.writeFileSync(file, JSON.stringify(taken));
  profiler.disconnect();
  profiler = undefined;
}

/**
 * The loop's delay during one phase, measured as bench/lib/server-child.ts measures the service's:
 * what the same load and the same machine (other processes holding the cores, the collector) do
 * to a broker that has no work of its own.
 */
let loopDelay: IntervalHistogram | undefined;
function eventLoopDelay(action: 'loopStart' | 'loopStop'): { p50Ms: number; p99Ms: number; maxMs: number } | null {
  if (action === 'loopStart') {
    loopDelay?.disable();
    loopDelay = monitorEventLoopDelay({ resolution: 5 });
    loopDelay.enable();
    return null;
  }
  if (!loopDelay) throw new Error('no event-loop delay measurement was started');
  loopDelay.disable();
  const result = {
    p50Ms: loopDelay.percentile(50) / 1e6,
    p99Ms: loopDelay.percentile(99) / 1e6,
    maxMs: loopDelay.max / 1e6,
  };
  loopDelay = undefined;
  return result;
}

process.on('message', (raw) => {
  const msg = raw as {
    id: number;
    cmd: 'stats' | 'gc' | 'stop' | 'publishOta' | 'profileStart' | 'profileStop' | 'loopStart' | 'loopStop';
    serials?: string[];
    file?: string;
  };
  if (msg.cmd === 'loopStart' || msg.cmd === 'loopStop') {
    process.send?.({ id: msg.id, loop: eventLoopDelay(msg.cmd) });
    return;
  }
  if (msg.cmd === 'profileStart' || msg.cmd === 'profileStop') {
    void profile(msg.cmd, msg.file).then(() => process.send?.({ id: msg.id }));
    return;
  }
  if (msg.cmd === 'publishOta') {
    void publishOta(msg.serials ?? []).then(() => process.send?.({ id: msg.id, published: true }));
    return;
  }
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
