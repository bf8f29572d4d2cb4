import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';

/** `--smoke`: a tiny run that proves the benchmark works (CI) and records nothing. */
export const isSmoke = (argv: string[] = process.argv): boolean => argv.includes('--smoke');

const RESULTS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'RESULTS.md');

function sh(command: string): string {
  try {
    return execSync(command, { encoding: 'utf8' }).trim();
  } catch {
    return '(unavailable)';
  }
}

/**
 * Milliseconds one core takes for a fixed piece of work like the service's own (JSON of a page
 * of 100 devices, SHA-256 of firmware bytes), best of three. These machines differ in speed by
 * up to four times from one session to the next under the same model name; figures of two
 * records compare only in proportion to their yardsticks.
 */
export function cpuYardstickMs(): number {
  const page = Array.from({ length: 100 }, (_, i) => ({
    serial: `LX-${String(i).padStart(6, '0')}`,
    name: `Fixture ${i}`,
    model: 'LX-200',
    firmware: '1.9.2',
    status: 'online',
    last_seen: new Date(1_700_000_000_000 + i).toISOString(),
    ip: `10.0.${i}.7`,
    tags: { zone: `z${i % 7}` },
    config: { desired: { brightness: i }, in_sync: true },
  }));
  const bytes = Buffer.alloc(16 * 1024 * 1024, 7);
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    const started = performance.now();
    for (let i = 0; i < 1500; i++) JSON.parse(JSON.stringify(page));
    createHash('sha256').update(bytes).digest();
    best = Math.min(best, performance.now() - started);
  }
  return Math.round(best);
}

/** The machine a figure was measured on: CPU count, memory, Node version, CPU model, speed. */
export function machineDescription(): string[] {
  return [
    `nproc: ${sh('nproc')} (${os.cpus()[0]?.model ?? 'unknown CPU'})`,
    `free -h: ${sh('free -h | awk \'/^Mem:/ {print "total " $2 ", used " $3 ", available " $7}\'')}`,
    `node: ${process.version}`,
    `CPU yardstick: ${cpuYardstickMs()} ms (bench/lib/results.ts cpuYardstickMs; lower is faster)`,
    // The machine is shared: a figure means little without knowing what else was running.
    `load average while recording (1/5/15 min): ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ')}`,
  ];
}

/** Appends one section to bench/RESULTS.md: title, date, machine, command, figures. */
export function recordResults(input: { title: string; command: string; figures: string[]; notes?: string[] }): void {
  const lines = [
    '',
    `## ${input.title} (${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
    '',
    ...machineDescription().map((l) => `- ${l}`),
    `- command: \`${input.command}\``,
    '',
    ...input.figures.map((f) => `- ${f}`),
    ...(input.notes?.length ? ['', ...input.notes] : []),
    '',
  ];
  fs.appendFileSync(RESULTS, lines.join('\n'));
}

/** Percentile of already sorted numbers (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
