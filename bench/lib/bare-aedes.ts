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

/** The loop's delay over one phase (monitorEventLoopDelay, 5 ms resolution). */
export interface LoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface BareAedes {
  url: string;
  port: number;
  stats: () => Promise<BareAedesStats>;
  /** Forces a GC, then the stats. */
  gc: () => Promise<BareAedesStats>;
  /** CPU µs of the broker process so far. */
  cpu: () => Promise<number>;
  /** The same, split into user and system (kernel) time. */
  cpuUsage: () => Promise<NodeJS.CpuUsage>;
  /** Publishes an OTA command (QoS 1) to each serial; resolves when Aedes confirmed them all. */
  publishOta: (serials: string[]) => Promise<void>;
  /** A CPU profile of the broker process (100 µs sampling) between start and stop, written to `file`. */
  startProfile: () => Promise<void>;
  stopProfile: (file: string) => Promise<void>;
  /** The broker's event-loop delay between start and stop, as the service's is measured. */
  startEventLoopDelay: () => Promise<void>;
  stopEventLoopDelay: () => Promise<LoopDelay>;
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
  type Answer = BareAedesStats & { loop?: LoopDelay | null };
  const waiting = new Map<number, (answer: Answer) => void>();
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bare Aedes exited with ${code} before it was ready`)));
    child.on('message', (raw) => {
      const msg = raw as Answer & { ready?: boolean; port?: number; id?: number };
      if (msg.ready) resolve(msg.port!);
      else if (msg.id !== undefined) {
        waiting.get(msg.id)?.(msg);
        waiting.delete(msg.id);
      }
    });
  });
  const ask = (
    cmd: 'stats' | 'gc' | 'stop' | 'publishOta' | 'profileStart' | 'profileStop' | 'loopStart' | 'loopStop',
    extra: Record<string, unknown> = {},
  ) =>
    new Promise<Answer>((resolve) => {
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
    cpuUsage: async () => (await ask('stats')).cpu,
    cpu: async () => {
      const { user, system } = await bare.cpuUsage();
      return user + system;
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
    startEventLoopDelay: async () => {
      await ask('loopStart');
    },
    stopEventLoopDelay: async () => {
      const { loop } = await ask('loopStop');
      if (!loop) throw new Error('bare Aedes measured no event-loop delay');
      return loop;
    },
    stop: async () => {
      await ask('stop');
      await exited;
    },
  };
  return bare;
}
