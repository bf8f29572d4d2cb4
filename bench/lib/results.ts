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

/** One row of the table at the top of bench/RESULTS.md: a benchmark's current figure and its target. */
export interface CurrentFigure {
  /** What is measured; a later record with the same id replaces the row. */
  id: string;
  figure: string;
  target: string;
  /** null: a figure recorded without a target. */
  met: boolean | null;
}

const TABLE_START = '<!-- current-figures:start -->';
const TABLE_END = '<!-- current-figures:end -->';
const TABLE_HEAD = [
  '| measure | current figure | target | met | recorded (UTC) | CPU yardstick | command |',
  '|---|---|---|---|---|---|---|',
];

/**
 * The table of current figures with `rows` put in: a row of the same id is replaced, others are
 * appended. Rows are `| id | figure | target | met | date | yardstick | command |`.
 */
export function withCurrentFigures(
  text: string,
  rows: Array<CurrentFigure & { date: string; yardstickMs: number; command: string }>,
): string {
  const start = text.indexOf(TABLE_START);
  const end = text.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`bench/RESULTS.md has no ${TABLE_START} ... ${TABLE_END} table`);
  const lines = text
    .slice(start + TABLE_START.length, end)
    .split('\n')
    .filter((l) => l.startsWith('| ') && !TABLE_HEAD.includes(l));
  const cell = (value: string) => value.replaceAll('|', '\\|');
  for (const row of rows) {
    const line = `| ${cell(row.id)} | ${cell(row.figure)} | ${cell(row.target)} | ${row.met === null ? 'n/a' : row.met ? 'met' : '**not met**'} | ${row.date} | ${row.yardstickMs} ms | \`${cell(row.command)}\` |`;
    const at = lines.findIndex((l) => l.startsWith(`| ${cell(row.id)} |`));
    if (at >= 0) lines[at] = line;
    else lines.push(line);
  }
  return `${text.slice(0, start + TABLE_START.length)}\n${[...TABLE_HEAD, ...lines].join('\n')}\n${text.slice(end)}`;
}

/**
 * Appends one section to bench/RESULTS.md (title, date, machine, command, figures) and puts
 * `current` into the table of current figures at its top. A figure line is a bullet unless it is
 * empty or a table row (`| ...`).
 */
export function recordResults(input: {
  title: string;
  command: string;
  figures: string[];
  notes?: string[];
  current?: CurrentFigure[];
}): void {
  const date = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const machine = machineDescription();
  const lines = [
    '',
    `## ${input.title} (${date} UTC)`,
    '',
    ...machine.map((l) => `- ${l}`),
    `- command: \`${input.command}\``,
    '',
    ...input.figures.map((f) => (f === '' || f.startsWith('|') ? f : `- ${f}`)),
    ...(input.notes?.length ? ['', ...input.notes] : []),
    '',
  ];
  let text = fs.readFileSync(RESULTS, 'utf8') + lines.join('\n');
  if (input.current?.length) {
    const yardstickMs = Number(/CPU yardstick: (\d+) ms/.exec(machine.join('\n'))?.[1] ?? NaN);
    text = withCurrentFigures(
      text,
      input.current.map((row) => ({ ...row, date, yardstickMs, command: input.command })),
    );
  }
  fs.writeFileSync(RESULTS, text);
}

/** Percentile of already sorted numbers (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
