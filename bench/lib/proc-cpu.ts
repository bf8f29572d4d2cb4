import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ: 100 on Linux). */
const USER_HZ = 100;

/**
 * CPU time (µs) of one process so far from /proc, all its threads, or undefined when it is gone
 * (or there is no /proc). Resolution 10 ms.
 */
export function processCpuMicros(pid: number): number | undefined {
  const used = processCpuUsage(pid);
  return used === undefined ? undefined : used.user + used.system;
}

/**
 * The same split as process.cpuUsage() gives: user and system (kernel) time (µs) of one process
 * so far, or undefined when it is gone (or there is no /proc). Resolution 10 ms.
 */
export function processCpuUsage(pid: number): NodeJS.CpuUsage | undefined {
  return cpuUsageOf(`/proc/${pid}/stat`);
}

/** utime and stime (µs) of a /proc stat file, or undefined when it cannot be read. */
function cpuUsageOf(statFile: string): NodeJS.CpuUsage | undefined {
  try {
    const stat = readFileSync(statFile, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields after the command: state is index 0, so utime (14th overall) is 11 and stime 12.
    return { user: (Number(fields[11]) / USER_HZ) * 1e6, system: (Number(fields[12]) / USER_HZ) * 1e6 };
  } catch {
    return undefined;
  }
}

/**
 * CPU time (µs) so far of this process's thread named `name` (its /proc comm, as Node's worker
 * `name` sets it), or undefined when there is none.
 */
export function ownThreadCpuMicros(name: string): number | undefined {
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      if (readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() !== name) continue;
      // The thread's own figures are under task/: /proc/<tid>/stat answers for the whole process.
      const used = cpuUsageOf(`/proc/self/task/${tid}/stat`);
      return used === undefined ? undefined : used.user + used.system;
    }
  } catch {
    // No /proc, or the thread ended while it was read.
  }
  return undefined;
}
