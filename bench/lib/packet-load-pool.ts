import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConnectResult, LoadDevice, PhaseResult } from './packet-load';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface PoolPhase extends Omit<PhaseResult, 'sample'> {
  /** The generator processes' CPU (µs) and their worst event-loop delay p99 (ms). */
  generators: { processes: number; cpuUs: number; worstLagP99Ms: number };
  /**
   * The generators were the limit, not the broker: a generator used more than 80 % of a core,
   * its event loop lagged more than 50 ms at p99, or it sent late. A figure then says so.
   */
  generatorBound: boolean;
}

/** Several packet-load generator processes, the devices split between them. */
export class PacketLoadPool {
  private constructor(private readonly children: { child: ChildProcess; ask: (m: object) => Promise<unknown> }[]) {}

  static async start(processes: number): Promise<PacketLoadPool> {
    const children = await Promise.all(
      Array.from({ length: processes }, async () => {
        const child = fork(path.join(here, 'packet-load-child.ts'), [], {
          execArgv: ['--import', 'tsx'],
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        let nextId = 1;
        const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
        await new Promise<void>((resolve, reject) => {
          child.once('exit', (code) => reject(new Error(`generator exited with ${code}`)));
          child.on('message', (raw) => {
            const m = raw as { ready?: boolean; id?: number; result?: unknown; error?: string };
            if (m.ready) resolve();
            else if (m.id !== undefined) {
              const w = waiting.get(m.id);
              waiting.delete(m.id);
              if (m.error) w?.reject(new Error(m.error));
              else w?.resolve(m.result);
            }
          });
        });
        const ask = (message: object) =>
          new Promise<unknown>((resolve, reject) => {
            const id = nextId++;
            waiting.set(id, { resolve, reject });
            child.send({ id, ...message });
          });
        return { child, ask };
      }),
    );
    return new PacketLoadPool(children);
  }

  /**
   * Connects the devices, split between the generators. `parallel`: CONNECTs in flight per
   * generator (default 200); `offset`: the index the devices' source addresses count from, so a
   * later phase or target does not reuse ports still in TIME_WAIT.
   */
  async connect(input: {
    url: string;
    devices: LoadDevice[];
    clean: boolean;
    parallel?: number;
    offset?: number;
    /** Topic filters a device subscribes to on a new session (PacketLoad.connect). */
    subscribe?: string[];
  }): Promise<ConnectResult> {
    const { hostname, port } = new URL(input.url);
    const share = Math.ceil(input.devices.length / this.children.length);
    // The generator's answer to `connect` (packet-load-child.ts), over IPC.
    const results = (await Promise.all(
      this.children.map(({ ask }, i) =>
        ask({
          cmd: 'connect',
          host: hostname,
          port: Number(port),
          clean: input.clean,
          devices: input.devices.slice(i * share, (i + 1) * share),
          offset: (input.offset ?? 0) + i * share,
          ...(input.parallel ? { parallel: input.parallel } : {}),
          ...(input.subscribe ? { subscribe: input.subscribe } : {}),
        }),
      ),
    )) as ConnectResult[];
    return {
      connected: results.reduce((s, r) => s + r.connected, 0),
      failed: results.reduce((s, r) => s + r.failed, 0),
      seconds: Math.max(...results.map((r) => r.seconds)),
      cpuUs: results.reduce((s, r) => s + r.cpuUs, 0),
    };
  }

  /** A paced phase of `rate` QoS 1 heartbeats per second in all, split evenly. */
  async run(rate: number, seconds: number): Promise<PoolPhase> {
    const n = this.children.length;
    // The generator's answer to `run` (packet-load-child.ts), over IPC.
    const results = (await Promise.all(
      this.children.map(({ ask }) => ask({ cmd: 'run', rate: rate / n, seconds })),
    )) as PhaseResult[];
    const sent = results.reduce((s, r) => s + r.sent, 0);
    const acked = results.reduce((s, r) => s + r.acked, 0);
    // Merge the samples, each weighted by its generator's share of the publishes sent.
    const weighted = results.flatMap((r) => r.sample.map((ms) => ({ ms, w: r.sent / Math.max(1, r.sample.length) })));
    weighted.sort((a, b) => a.ms - b.ms);
    const quantile = (q: number) => {
      if (acked < sent * q) return Infinity;
      let seen = 0;
      for (const { ms, w } of weighted) if ((seen += w) >= q * sent) return ms;
      return weighted.at(-1)?.ms ?? 0;
    };
    const cpuUs = results.reduce((s, r) => s + r.cpuUs, 0);
    const duration = Math.max(...results.map((r) => r.seconds));
    const worstLagP99Ms = Math.max(...results.map((r) => r.lagP99Ms));
    const late = results.reduce((s, r) => s + r.late, 0);
    const busiest = Math.max(...results.map((r) => r.cpuUs / 1e6 / Math.max(r.seconds, 1e-3)));
    return {
      offered: rate,
      sent,
      acked,
      p50Ms: quantile(0.5),
      p99Ms: quantile(0.99),
      cpuUs,
      lagP99Ms: worstLagP99Ms,
      late,
      seconds: duration,
      generators: { processes: n, cpuUs, worstLagP99Ms },
      generatorBound: busiest > 0.8 || worstLagP99Ms > 50 || late > sent * 0.01,
    };
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(async ({ child, ask }) => {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        await ask({ cmd: 'close' }).catch(() => undefined);
        await exited;
      }),
    );
  }
}
