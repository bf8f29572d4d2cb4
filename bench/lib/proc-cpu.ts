import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ: 100 on Linux). */
const USER_HZ = 100;

/**
 * CPU time (µs) of one process so far from /proc, or undefined when it is gone (or there is no
 * /proc). A thread id works too (Linux lists threads as /proc/<tid>). Resolution 10 ms.
 */
export function processCpuMicros(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields after the command: state is index 0, so utime (14th overall) is 11 and stime 12.
    return ((Number(fields[11]) + Number(fields[12])) / USER_HZ) * 1e6;
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
      if (readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() === name) return processCpuMicros(Number(tid));
    }
  } catch {
    // No /proc, or the thread ended while it was read.
  }
  return undefined;
}
