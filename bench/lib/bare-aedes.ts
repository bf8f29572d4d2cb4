import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface BareAedesStats {
  heartbeats: number;
  connected: number;
  memory: NodeJS.MemoryUsage;
  cpu: NodeJS.CpuUsage;
}

export interface BareAedes {
  url: string;
  port: number;
  stats: () => Promise<BareAedesStats>;
  /** Forces a GC, then the stats. */
  gc: () => Promise<BareAedesStats>;
  /** CPU µs of the broker process so far. */
  cpu: () => Promise<number>;
  /** Publishes an OTA command (QoS 1) to each serial; resolves when Aedes confirmed them all. */
  publishOta: (serials: string[]) => Promise<void>;
  /** A CPU profile of the broker process (100 µs sampling) between start and stop, written to `file`. */
  startProfile: () => Promise<void>;
  stopProfile: (file: string) => Promise<void>;
  /** Closes the broker (its clients are disconnected) and ends the process. */
  stop: () => Promise<void>;
}

/** bench/bare-aedes.server.ts in a process of its own: plain MQTT, or MQTT over TLS with `tls`. */
export async function startBareAedes(options: { tls?: { certFile: string; keyFile: string }; port?: number } = {}) {
  const child = fork(path.join(here, '..', 'bare-aedes.server.ts'), [], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    env: {
      ...process.env,
      ...(options.tls ? { BARE_AEDES_TLS_CERT: options.tls.certFile, BARE_AEDES_TLS_KEY: options.tls.keyFile } : {}),
      ...(options.port ? { BARE_AEDES_PORT: String(options.port) } : {}),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const waiting = new Map<number, (stats: BareAedesStats) => void>();
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bare Aedes exited with ${code} before it was ready`)));
    child.on('message', (raw) => {
      const msg = raw as BareAedesStats & { ready?: boolean; port?: number; id?: number };
      if (msg.ready) resolve(msg.port!);
      else if (msg.id !== undefined) {
        waiting.get(msg.id)?.(msg);
        waiting.delete(msg.id);
      }
    });
  });
  const ask = (
    cmd: 'stats' | 'gc' | 'stop' | 'publishOta' | 'profileStart' | 'profileStop',
    extra: Record<string, unknown> = {},
  ) =>
    new Promise<BareAedesStats>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      child.send({ id, cmd, ...extra });
    });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const bare: BareAedes = {
    url: `${options.tls ? 'mqtts' : 'mqtt'}://127.0.0.1:${port}`,
    port,
    stats: () => ask('stats'),
    gc: () => ask('gc'),
    cpu: async () => {
      const { cpu } = await ask('stats');
      return cpu.user + cpu.system;
    },
    publishOta: async (serials) => {
      await ask('publishOta', { serials });
    },
    startProfile: async () => {
      await ask('profileStart');
    },
    stopProfile: async (file) => {
      await ask('profileStop', { file });
    },
    stop: async () => {
      await ask('stop');
      await exited;
    },
  };
  return bare;
}
