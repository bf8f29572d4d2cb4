import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FleetOptions } from '../../simulator/src/fleet';

/**
 * A simulated fleet in a process of its own: thousands of devices reacting to commands (downloads,
 * sha256, reports) must not share an event loop with the benchmark's clocks and polls, or the
 * figures measure the load generator's own lag (a 5,000-device OTA run saw every command out
 * 1.7 s after the deploy, and the in-process poll only 4.7 s after it).
 */
export interface FleetProcess {
  start(): Promise<{ connected: number; failed: number; seconds: number }>;
  stop(): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));

export function startFleetProcess(options: FleetOptions): FleetProcess {
  const child: ChildProcess = fork(path.join(here, 'fleet-child.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const reply = <T>(cmd: Record<string, unknown>): Promise<T> =>
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
    });
  return {
    start: () => reply({ cmd: 'start', options }),
    async stop() {
      // 10,000 graceful disconnects may take a while; the benchmark's figures are taken by then.
      await Promise.race([reply({ cmd: 'stop' }).catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 15_000).unref())]);
      child.kill('SIGKILL');
    },
  };
}
