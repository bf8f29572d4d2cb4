import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FleetOptions, FleetStats } from '#simulator/fleet';

/**
 * A simulated fleet in a process of its own: thousands of devices reacting to commands (downloads,
 * sha256, reports) must not share an event loop with the benchmark's clocks and polls, or the
 * figures measure the load generator's own lag (a 5,000-device OTA run saw every command out
 * 1.7 s after the deploy, and the in-process poll only 4.7 s after it).
 */
export interface FleetProcess {
  start(): Promise<{ connected: number; failed: number; seconds: number }>;
  /** Every device heartbeats every `seconds` from now on. */
  setHeartbeatPeriod(seconds: number): Promise<void>;
  /** Devices accept OTA commands but download nothing until releaseDownloads (Fleet.holdDownloads). */
  holdDownloads(): Promise<void>;
  /** Held downloads start, spread over `spreadMs`. */
  releaseDownloads(spreadMs: number): Promise<void>;
  /** Fleet counters, the fleet process's own CPU time so far (µs) and when it read them (epoch ms). */
  stats(): Promise<FleetStats & { cpu: NodeJS.CpuUsage; atMs: number }>;
  /** Starts recording every heartbeat of the first `count` connected devices; returns their serials. */
  watchProbes(count: number): Promise<string[]>;
  /** The probe heartbeats recorded since watchProbes (and stops recording). */
  probeLog(): Promise<ProbeHeartbeat[]>;
  stop(): Promise<void>;
}

/** One heartbeat of a probe device: when it was published (epoch ms) and the uptime it carried. */
export interface ProbeHeartbeat {
  serial: string;
  uptimeS: number;
  sentAtMs: number;
}

export type FleetCommand =
  | { cmd: 'start'; options: FleetOptions }
  | { cmd: 'heartbeatPeriod'; seconds: number }
  | { cmd: 'holdDownloads' }
  | { cmd: 'releaseDownloads'; spreadMs: number }
  | { cmd: 'stats' }
  | { cmd: 'watchProbes'; count: number }
  | { cmd: 'probeLog' }
  | { cmd: 'stop' };

const here = path.dirname(fileURLToPath(import.meta.url));

export function startFleetProcess(options: FleetOptions): FleetProcess {
  const child: ChildProcess = fork(path.join(here, 'fleet-child.ts'), [], {
    // BENCH_FLEET_NODE_OPTIONS: e.g. "--cpu-prof --cpu-prof-dir=DIR" to profile the load generator.
    execArgv: ['--import', 'tsx', ...(process.env.BENCH_FLEET_NODE_OPTIONS?.split(' ').filter(Boolean) ?? [])],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  // One request at a time per child: answers come back in order.
  let queue: Promise<unknown> = Promise.resolve();
  const reply = <T>(cmd: FleetCommand): Promise<T> => {
    const next = queue.then(
      () =>
        new Promise<T>((resolve, reject) => {
          const onExit = (code: number | null) => reject(new Error(`fleet process exited with ${code}`));
          child.once('exit', onExit);
          child.once('message', (msg) => {
            child.off('exit', onExit);
            const m = msg as { ok: boolean; result?: T; error?: string };
            if (m.ok) resolve(m.result as T);
            else reject(new Error(m.error));
          });
          child.send(cmd);
        }),
    );
    queue = next.catch(() => undefined);
    return next;
  };
  return {
    start: () => reply({ cmd: 'start', options }),
    setHeartbeatPeriod: async (seconds) => {
      await reply({ cmd: 'heartbeatPeriod', seconds });
    },
    holdDownloads: async () => {
      await reply({ cmd: 'holdDownloads' });
    },
    releaseDownloads: async (spreadMs) => {
      await reply({ cmd: 'releaseDownloads', spreadMs });
    },
    stats: () => reply({ cmd: 'stats' }),
    watchProbes: async (count) => (await reply<{ serials: string[] }>({ cmd: 'watchProbes', count })).serials,
    probeLog: () => reply({ cmd: 'probeLog' }),
    async stop() {
      // 10,000 graceful disconnects may take a while; the benchmark's figures are taken by then.
      await Promise.race([
        reply({ cmd: 'stop' }).catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, 15_000).unref()),
      ]);
      // The child exits by itself after a stop (so a --cpu-prof profile gets written); a hung one is killed.
      if (child.exitCode === null)
        await Promise.race([
          new Promise((resolve) => child.once('exit', resolve)),
          new Promise((resolve) => setTimeout(resolve, 5_000).unref()),
        ]);
      child.kill('SIGKILL');
    },
  };
}
