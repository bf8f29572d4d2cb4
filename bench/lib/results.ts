import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execSync } from 'node:child_process';
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

/** The machine a figure was measured on: CPU count, memory, Node version, CPU model. */
export function machineDescription(): string[] {
  return [
    `nproc: ${sh('nproc')} (${os.cpus()[0]?.model ?? 'unknown CPU'})`,
    `free -h: ${sh("free -h | awk '/^Mem:/ {print \"total \" $2 \", used \" $3 \", available \" $7}'")}`,
    `node: ${process.version}`,
    // The machine is shared: a figure means little without knowing what else was running.
    `load average while recording (1/5/15 min): ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}`,
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
