import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { expect } from 'vitest';
import type { FuzzService } from './service-child';
import { probe } from './service-child';
import { fdGrowth, fdSnapshot, procAvailable, tempUploads, type FdSnapshot } from './leaks';

/**
 * The fuzz runner: one fast-check property per kind of input, run against the service in its
 * own process (service-child.ts says why). Every case is sent, its answer judged on its own (no
 * 5xx, no stack trace, an answer at all), and the process must still answer GET /healthz right
 * after it. After each batch (and after every case while shrinking), once the batch's sockets
 * had time to close, the service must hold no connection the batch opened, no upload temp file,
 * and no more descriptors than when the property started, give or take FD_SLACK (read from
 * /proc/<pid>/fd; the database's own connections and files are counted apart).
 *
 * A failure names the case, the seed and fast-check's path and counterexample. A case that
 * crashes the process or gets a wrong answer is shrunk (the service restarted as needed, within
 * a budget). A batch that leaves something behind names the cases that opened it (by client port,
 * socket inode or temp file) and replays them alone to confirm; every case of the batch is
 * written in full to a file under the OS temp folder.
 *
 * Seed: FUZZ_SEED when set, a fixed one in CI (CI=true), a random one otherwise (printed at
 * start). FUZZ_SCALE multiplies the number of cases (e.g. FUZZ_SCALE=10 for a long local run).
 */
export const CI_SEED = 0x1f_2024;

export function fuzzSeed(): number {
  if (process.env.FUZZ_SEED) return Number(process.env.FUZZ_SEED);
  if (process.env.CI) return CI_SEED;
  return Math.floor(Math.random() * 0x7fff_ffff);
}

const SCALE = Math.max(0.05, Number(process.env.FUZZ_SCALE ?? 1) || 1);

/** Descriptors a batch may leave beyond the baseline (a timer's eventfd, a lazily opened file). */
const FD_SLACK = 4;
/** While shrinking a failure: at most this many service restarts and this much time. */
const SHRINK_RESTARTS = Number(process.env.FUZZ_SHRINK_RESTARTS ?? 6);
const SHRINK_MS = Number(process.env.FUZZ_SHRINK_MS ?? 30_000);

export interface CaseResult {
  /** What is wrong with this answer on its own: a 5xx, a stack trace, no answer. */
  problems: string[];
  /** Our ports of the connections the case opened (the server sees them as remote ports). */
  clientPorts: number[];
  /** A short label for the statistics: `400`, `101`, `closed`, `connack 5`... */
  outcome: string;
}

export interface FuzzSpec<C> {
  name: string;
  /** Cases per run (before FUZZ_SCALE); a multiple of `batchSize`. */
  runs: number;
  batchSize: number;
  arbitrary: fc.Arbitrary<C>;
  /** The case as a reproduction: the raw request, the packet bytes, the document and variables. */
  show(c: C): string;
  send(c: C): Promise<CaseResult>;
  /** More checks after each batch (the broker still answers a CONNECT...): problems found. */
  afterBatch?: () => Promise<string[]>;
}

export interface FuzzSummary {
  cases: number;
  ms: number;
  outcomes: Record<string, number>;
}

interface Entry {
  index: number;
  value: unknown;
  text: string;
  ports: number[];
  tmp: string[];
  /** Socket inodes the service opened while this case ran. */
  sockets: string[];
}

interface Baseline {
  fds: FdSnapshot | null;
  tmp: Set<string>;
}

/** Long runs of one character shortened (`a⟨×9000⟩`), then the whole cut to `max` characters. */
const clip = (text: string, max = 1200): string => {
  const short = text.replace(/(.)\1{23,}/gsu, (run, c: string) => `${c}⟨×${run.length / c.length}⟩`);
  return short.length > max ? `${short.slice(0, max)}…(${short.length} characters)` : short;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class FuzzRunner {
  private readonly fdCheck: boolean;

  constructor(
    private readonly service: FuzzService,
    readonly seed: number,
  ) {
    this.fdCheck = procAvailable(service.pid);
    console.log(
      `[fuzz] seed ${seed} (${process.env.FUZZ_SEED ? 'FUZZ_SEED' : process.env.CI ? 'fixed for CI' : 'random'}; ` +
        `replay with FUZZ_SEED=${seed}), FUZZ_SCALE ${SCALE}` +
        (this.fdCheck ? '' : '; /proc is not readable here: no descriptor check'),
    );
  }

  /** Runs one property; resolves with its statistics, rejects with fast-check's report. */
  async run<C>(spec: FuzzSpec<C>): Promise<FuzzSummary> {
    const { service } = this;
    const runs = Math.max(spec.batchSize, Math.round((spec.runs * SCALE) / spec.batchSize) * spec.batchSize);
    await this.ensureHealthy();
    let baseline = await this.baseline();
    const outcomes: Record<string, number> = {};
    let sinceCheck: Entry[] = [];
    let index = 0;
    /** Set by the first failure: fast-check then shrinks, each candidate on its own, within a budget. */
    let shrinking: { since: number; restarts: number; skip: boolean } | null = null;
    let lastSockets = new Set(baseline.fds?.sockets.keys() ?? []);
    const started = Date.now();

    const fail = (headline: string, problems: string[], entries: Entry[]): never => {
      // The cases the problems name (the owner of a leaked socket or file), and the last few.
      const named = new Set([...problems.join('\n').matchAll(/case #(\d+)/g)].map((m) => Number(m[1])));
      const shown = entries.filter((e) => named.has(e.index) || e.index > index - 5).slice(-25);
      // Every case since the last passing check in full, for a reproduction (the message shortens them).
      const file = path.join(os.tmpdir(), `fleet-fuzz-${this.seed}-${spec.name.replace(/\W+/g, '-')}-${index}.txt`);
      fs.writeFileSync(file, [...problems, '', ...entries.map((e) => `#${e.index}: ${e.text}`)].join('\n'));
      const lines = [
        `${spec.name}: ${headline}`,
        ...problems.map((p) => `  - ${clip(p, 4000)}`),
        `cases since the last passing check: #${entries[0]?.index ?? index}..#${index}; the ones named above and the last ones:`,
        ...shown.map((e) => `  #${e.index}: ${clip(e.text)}`),
        `(in full: ${file})`,
        `seed ${this.seed} (FUZZ_SEED=${this.seed} replays this run; fast-check's path and counterexample are above)`,
      ];
      throw new Error(lines.join('\n'));
    };

    const property = fc.asyncProperty(spec.arbitrary, async (c) => {
      if (shrinking) {
        // Shrinking: every candidate on a healthy service, checked on its own, within a budget.
        if (shrinking.skip || shrinking.restarts >= SHRINK_RESTARTS || Date.now() - shrinking.since > SHRINK_MS) return;
        if (!service.isAlive() || (await probe(service.httpPort, '/healthz', 5000)) !== 200) {
          shrinking.restarts += 1;
          await service.restart();
        }
        baseline = await this.baseline();
        lastSockets = new Set(baseline.fds?.sockets.keys() ?? []);
        sinceCheck = [];
      }
      index += 1;
      const entry: Entry = { index, value: c, text: spec.show(c), ports: [], tmp: [], sockets: [] };
      sinceCheck.push(entry);
      const result = await this.send(spec, c);
      entry.ports = result.clientPorts;
      outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1;
      entry.tmp = tempUploads(service.dataDir).filter((name) => !baseline.tmp.has(name));
      if (this.fdCheck && service.isAlive() && service.pid !== undefined) {
        try {
          const now = fdSnapshot(service.pid, [service.httpPort, service.mqttPort]);
          entry.sockets = [...now.sockets.keys()].filter((inode) => !lastSockets.has(inode));
          lastSockets = new Set(now.sockets.keys());
        } catch {
          // the process just ended: the liveness check below says so
        }
      }
      const problems = [...result.problems];
      const live = await this.liveness();
      if (live) problems.push(live);
      if (problems.length > 0) {
        shrinking ??= { since: Date.now(), restarts: 0, skip: false };
        fail(`case #${index} broke the service or got a wrong answer`, problems, sinceCheck);
      }
      if (shrinking || index % spec.batchSize === 0 || index === runs) {
        const after = await this.afterBatch(spec, baseline, sinceCheck);
        if (after.length > 0) {
          if (!shrinking) {
            // A batch left something behind: the case that ended the batch is seldom the one
            // that did it, so nothing to shrink; replay the cases the problems name, one by one.
            shrinking = { since: Date.now(), restarts: 0, skip: true };
            after.push(...(await this.replay(spec, after, sinceCheck)));
            after.push("(fast-check's counterexample is only the case that ended the batch)");
          }
          fail(`the check after case #${index} failed`, after, sinceCheck);
        }
        sinceCheck = [];
      }
    });

    await fc.assert(property, { seed: this.seed, numRuns: runs, includeErrorInReport: true });
    const summary = { cases: index, ms: Date.now() - started, outcomes };
    const top = Object.entries(outcomes)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([k, n]) => `${k}×${n}`)
      .join(', ');
    console.log(`[fuzz] ${spec.name}: ${summary.cases} cases in ${(summary.ms / 1000).toFixed(1)} s; answers: ${top}`);
    return summary;
  }

  /** A service that answers; restarted when an earlier property left it dead or hung. */
  async ensureHealthy(): Promise<void> {
    if (!this.service.isAlive() || (await probe(this.service.httpPort, '/healthz', 5000)) !== 200) {
      await this.service.restart();
    }
  }

  private async send<C>(spec: FuzzSpec<C>, c: C): Promise<CaseResult> {
    try {
      return await spec.send(c);
    } catch (error) {
      return {
        problems: [`the fuzz client failed: ${(error as Error).stack ?? String(error)}`],
        clientPorts: [],
        outcome: 'client error',
      };
    }
  }

  /** The process still runs and answers GET /healthz (no timing assertion: 5 s to answer). */
  private async liveness(): Promise<string | null> {
    const { service } = this;
    if (!service.isAlive()) return service.describeExit();
    const status = await probe(service.httpPort, '/healthz', 5000);
    if (status === 200) return null;
    // A crash under way: give the exit a moment to be seen, for the report's sake.
    await sleep(200);
    if (!service.isAlive()) return service.describeExit();
    return `GET /healthz answered ${status ?? 'nothing within 5 s'} (the service is alive but does not serve)`;
  }

  private async baseline(): Promise<Baseline> {
    const tmp = new Set(tempUploads(this.service.dataDir));
    if (!this.fdCheck || this.service.pid === undefined) return { fds: null, tmp };
    // Let connections of the previous step close first.
    const ports = [this.service.httpPort, this.service.mqttPort];
    let fds = fdSnapshot(this.service.pid, ports);
    for (let i = 0; i < 40 && fds.accepted.length > 0; i++) {
      await sleep(50);
      fds = fdSnapshot(this.service.pid, ports);
    }
    return { fds, tmp };
  }

  /** What is left now that was not at `baseline`, naming the cases of `entries` that opened it. */
  private leftovers(baseline: Baseline, entries: Entry[]): string[] {
    const { service } = this;
    const found: string[] = [];
    const tmp = tempUploads(service.dataDir).filter((name) => !baseline.tmp.has(name));
    if (tmp.length > 0) {
      const from = tmp.map((name) => {
        const owner = entries.find((e) => e.tmp.includes(name));
        // A request can still write after its answer: the file may be the previous case's.
        return `${name}${owner ? ` (first seen after case #${owner.index}, or left by case #${owner.index - 1} still running)` : ''}`;
      });
      found.push(`upload temp files left in DATA_DIR/firmware: ${from.join(', ')}`);
    }
    if (baseline.fds && service.pid !== undefined && service.isAlive()) {
      const now = fdSnapshot(service.pid, [service.httpPort, service.mqttPort]);
      const known = new Set(baseline.fds.accepted.map((a) => `${a.localPort}:${a.remotePort}`));
      const held = now.accepted.filter((a) => !known.has(`${a.localPort}:${a.remotePort}`));
      if (held.length > 0) {
        const list = held.map((a) => {
          const owner = entries.find((e) => e.ports.includes(a.remotePort));
          return `:${a.localPort} from client port ${a.remotePort} (${a.state})${owner ? `, opened by case #${owner.index}` : ''}`;
        });
        found.push(`connections still held by the service: ${list.join('; ')}`);
      }
      if (now.comparable > baseline.fds.comparable + FD_SLACK) {
        const before = baseline.fds.sockets;
        const opened = [...now.sockets]
          .filter(([inode, kind]) => !before.has(inode) && !kind.startsWith('outbound'))
          .map(([inode, kind]) => {
            const owner = entries.find((e) => e.sockets.includes(inode));
            return `socket ${inode} (${kind})${owner ? ` opened during case #${owner.index}` : ''}`;
          });
        found.push(
          `open descriptors ${now.comparable} (not counting the database's connections and files), ` +
            `${baseline.fds.comparable} before (slack ${FD_SLACK}); grew: ${JSON.stringify(fdGrowth(baseline.fds, now))}` +
            (opened.length ? `; still open: ${opened.slice(0, 20).join('; ')}` : ''),
        );
      }
    }
    return found;
  }

  /**
   * After a batch: alive, /healthz answers, and (once the connections of the batch closed) no
   * connection the batch opened is still held by the service, no more descriptors than before
   * (plus a small slack) and no upload temp file left behind.
   */
  private async afterBatch(spec: FuzzSpec<unknown>, baseline: Baseline, entries: Entry[]): Promise<string[]> {
    const live = await this.liveness();
    if (live) return [live];
    const problems: string[] = [];
    try {
      // Sockets close and temp files go asynchronously after the last answer.
      await expect.poll(() => this.leftovers(baseline, entries), { timeout: 10_000, interval: 100 }).toEqual([]);
    } catch {
      problems.push(...this.leftovers(baseline, entries));
    }
    if (problems.length === 0 && spec.afterBatch) problems.push(...(await spec.afterBatch()));
    return problems;
  }

  /** Sends the (up to 3) cases the problems name again, each on its own, and says what each leaves. */
  private async replay<C>(spec: FuzzSpec<C>, problems: string[], entries: Entry[]): Promise<string[]> {
    const named = [...new Set([...problems.join('\n').matchAll(/case #(\d+)/g)].map((m) => Number(m[1])))];
    const out: string[] = [];
    for (const n of named.slice(0, 3)) {
      const entry = entries.find((e) => e.index === n);
      if (!entry || !this.service.isAlive()) continue;
      const before = await this.baseline();
      await this.send(spec, entry.value as C);
      // Whatever the case opened, exactly (no slack): new temp files, sockets, accepted connections.
      const left = (): string[] => {
        const found = tempUploads(this.service.dataDir).filter((name) => !before.tmp.has(name));
        if (before.fds && this.service.pid !== undefined && this.service.isAlive()) {
          const now = fdSnapshot(this.service.pid, [this.service.httpPort, this.service.mqttPort]);
          for (const [inode, kind] of now.sockets)
            if (!before.fds.sockets.has(inode) && !kind.startsWith('outbound')) found.push(`a socket (${kind})`);
        }
        return found;
      };
      await sleep(300); // a request can still open or write after its answer
      let still = left();
      for (let i = 0; i < 30 && still.length > 0; i++) {
        await sleep(100);
        still = left();
      }
      out.push(
        still.length
          ? `replayed alone, case #${n} leaves again: ${still.join(', ')}`
          : `replayed alone, case #${n} leaves nothing (it needs the cases before it, or was not the one)`,
      );
    }
    return out;
  }
}

/**
 * Judges an HTTP answer on its own: no 5xx and no stack trace. A 503 passes only as the
 * service's own "come back later" (Retry-After: readiness, database down), or as the portal's
 * "not built yet" page (tests run without a portal build), recognised by its text or, for HEAD,
 * by its ETag (`portalEtag`, read once at start).
 */
export function judgeHttp(
  answer: { statuses: number[]; raw: string; headers: Record<string, string> },
  sent: string,
  portalEtag?: string,
): string[] {
  const problems: string[] = [];
  const expected503 =
    answer.headers['retry-after'] !== undefined ||
    answer.raw.includes('The portal has not been built yet') ||
    (portalEtag !== undefined && answer.headers.etag === portalEtag);
  for (const status of answer.statuses) {
    if (status >= 500 && !(status === 503 && expected503))
      problems.push(`answered ${status}: ${clip(answer.raw, 1500)}`);
  }
  const leak = stackLeak(answer.raw, sent);
  if (leak) problems.push(`the answer shows internals (${leak}): ${clip(answer.raw, 1500)}`);
  return problems;
}

const REPO = process.cwd();

/** A stack frame, a source path or node_modules in an answer (unless the request itself held it). */
export function stackLeak(text: string, sent: string): string | null {
  // "\n    at fn (/path/file.js:1:2)", raw, inside a JSON string ("\\n    at") or Express's HTML page.
  if (/(?:\n|\\n|<br>)(?:\s|&nbsp;)*at (?:async )?[\w$.<>[\] ]*\(?(?:file:|node:|\/)[^\s)]*:\d+:\d+/.test(text))
    return 'a stack frame';
  if (text.includes('node_modules') && !sent.includes('node_modules')) return 'a node_modules path';
  if (text.includes(REPO) && !sent.includes(REPO)) return 'a source path';
  if (/\.ts:\d+:\d+/.test(text) && !/\.ts:\d+:\d+/.test(sent)) return 'a source location';
  return null;
}
