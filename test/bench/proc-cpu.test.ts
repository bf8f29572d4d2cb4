import { existsSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { ownThreadCpuMicros, processCpuMicros, processCpuUsage } from '#bench/lib/proc-cpu';

/**
 * CPU time (ms) of the calling thread, from Linux's /proc/thread-self, as a worker's source: a
 * worker spinning by it rather than by the clock burns the same CPU however busy the machine is
 * (the suite runs files side by side).
 */
const THREAD_CPU_MS = `(() => {
  const stat = require('node:fs').readFileSync('/proc/thread-self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
})()`;

/** Burns `ms` of this process's CPU (process.cpuUsage, whatever the machine's load) on the calling thread. */
function spin(ms: number): void {
  const used = (): number => {
    const { user, system } = process.cpuUsage();
    return user + system;
  };
  const until = used() + ms * 1000;
  while (used() < until) Math.sqrt(Math.random());
}

/** A worker thread named `name` that burns `busyMs` of CPU, then waits until it is terminated. */
async function namedWorker(name: string, busyMs: number): Promise<Worker> {
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     const until = ${THREAD_CPU_MS} + ${busyMs};
     while (${THREAD_CPU_MS} < until) Math.sqrt(Math.random());
     parentPort.postMessage('spun');
     setInterval(() => {}, 1000);`,
    { eval: true, name },
  );
  await new Promise((resolve) => worker.once('message', resolve));
  return worker;
}

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.terminate()));
});

// The benchmarks split the service's CPU into its database thread and the rest with these.
describe.skipIf(!existsSync('/proc/thread-self/stat'))('CPU time from /proc', () => {
  it("reads a named thread's own CPU, not its process's", async () => {
    const idle = await namedWorker('proc-cpu-idle', 0);
    workers.push(idle);
    const threadBefore = ownThreadCpuMicros('proc-cpu-idle')!;
    const processBefore = processCpuMicros(process.pid)!;
    spin(400);
    const threadUs = ownThreadCpuMicros('proc-cpu-idle')! - threadBefore;
    const processUs = processCpuMicros(process.pid)! - processBefore;
    expect(processUs).toBeGreaterThanOrEqual(300_000);
    // The idle thread spent next to nothing while the main thread spun (10 ms ticks).
    expect(threadUs).toBeLessThan(100_000);
  });

  it("counts a busy named thread's CPU", async () => {
    const before = processCpuMicros(process.pid)!;
    const busy = await namedWorker('proc-cpu-busy', 400);
    workers.push(busy);
    expect(ownThreadCpuMicros('proc-cpu-busy')).toBeGreaterThanOrEqual(300_000);
    expect(processCpuMicros(process.pid)! - before).toBeGreaterThanOrEqual(300_000);
  });

  it('splits a process into user and kernel time, and knows when a thread is not there', () => {
    const used = processCpuUsage(process.pid)!;
    expect(used.user).toBeGreaterThan(0);
    expect(used.system).toBeGreaterThanOrEqual(0);
    expect(processCpuMicros(process.pid)).toBeGreaterThanOrEqual(used.user + used.system);
    expect(ownThreadCpuMicros('no-such-thread')).toBeUndefined();
  });
});
