import { readdirSync } from 'node:fs';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * CI's benchmark smoke run: every `bench/*.bench.ts` once with `--smoke` (tiny sizes, a few
 * seconds each) to prove the benchmarks still work. Figures of a smoke run are not recorded, so
 * two run at a time (BENCH_SMOKE_JOBS): most of a smoke run is waiting (servers starting, devices
 * retrying, settle times), and one at a time took 250 s on a quiet 2-core machine, twice that on
 * a busy one. Each bench's output is printed whole when it ends, so that two never interleave.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
/** The smoke run's longest (its reconnect storm waits out the devices' retry back-off): first. */
const LONGEST = 'connections.bench.ts';
const benches = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .sort((a, b) => Number(b === LONGEST) - Number(a === LONGEST) || a.localeCompare(b));

/**
 * Benchmarks that measure the machine's own Mosquitto (127.0.0.1:1883) as a baseline. Their
 * devices' client ids would take each other's sessions over there, so they never run together.
 */
const ON_SHARED_MOSQUITTO = new Set(['cluster.bench.ts', 'devices-gateway.bench.ts', 'heartbeat-capacity.bench.ts']);

const jobs = Math.max(1, Number(process.env.BENCH_SMOKE_JOBS ?? 2) || 1);

function runOne(file: string): Promise<boolean> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, file), '--smoke'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'warn' },
    });
    const output: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => output.push(d));
    child.stderr.on('data', (d: Buffer) => output.push(d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 5 * 60_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const ok = code === 0;
      process.stdout.write(Buffer.concat(output));
      console.log(
        `bench smoke ${file}: ${ok ? 'ok' : `FAILED (exit ${code ?? signal})`} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      resolve(ok);
    });
  });
}

const waiting = [...benches];
let onMosquitto = false;
let failed = 0;

/** One lane: takes the next bench it may run now (a Mosquitto one only while no other runs). */
async function lane(): Promise<void> {
  for (;;) {
    const index = waiting.findIndex((file) => !(onMosquitto && ON_SHARED_MOSQUITTO.has(file)));
    if (index < 0) {
      if (waiting.length === 0) return;
      await new Promise((r) => setTimeout(r, 200));
      continue;
    }
    const [file] = waiting.splice(index, 1) as [string];
    const mosquitto = ON_SHARED_MOSQUITTO.has(file);
    if (mosquitto) onMosquitto = true;
    try {
      if (!(await runOne(file))) failed += 1;
    } finally {
      if (mosquitto) onMosquitto = false;
    }
  }
}

const started = Date.now();
await Promise.all(Array.from({ length: jobs }, () => lane()));
console.log(
  `${benches.length - failed} passed, ${failed} failed (${jobs} at a time, ${((Date.now() - started) / 1000).toFixed(0)} s)`,
);
process.exit(failed ? 1 : 0);
