import { Readable } from 'node:stream';
import type { ServiceDeps } from '../../service-deps';
import { newId } from '../../shared/ids';
import type { FirmwareStorage } from '../firmware-storage';
import { DEFAULT_DELTA_MAX_IMAGE_BYTES, DELTA_FORMAT } from './delta-format';
import { buildDeltaInWorker, type BuiltDelta } from './delta-builder';
import type { DeltaJob } from './delta-worker';
import { previewDeltas, type DeltaPreview } from './delta-preview';
import {
  finishDelta,
  insertDelta,
  offerCandidates,
  pairsOfDeployment,
  reclaimBuild,
  releaseBuild,
  recordOffers,
  type DeltaPair,
} from '../store/firmware-deltas.store';

/** A delta a command offers (the link is signed by the publisher). */
export interface DeltaOffer {
  deltaId: string;
  from: string;
  sha256: string;
  size: number;
  format: typeof DELTA_FORMAT;
}

export interface DeltaCacheOptions {
  /** Largest image (old or new) a delta is built for (bytes); larger ones go whole. Default 32 MiB (DELTA_MAX_IMAGE_BYTES). */
  maxImageBytes?: number;
  /** A `building` row not finished after this long belongs to a stopped process and is built again (ms). Default 15 minutes. */
  staleBuildMs?: number;
  /** Builds one delta; default: in a worker thread (delta-builder.ts). Tests count builds with it. */
  build?: (job: DeltaJob, signal: AbortSignal) => Promise<BuiltDelta>;
}

/**
 * The delta cache (docs/ota.md "Delta images"). A deployment asks for the deltas from each
 * version its devices run to its target; each is built once for the whole cluster: the process
 * whose INSERT wins the unique key (from sha256, to sha256, format) builds it in a worker and
 * stores the file in firmware storage, which every process shares. Builds run one at a time per
 * process (each may take hundreds of MB), in the background: commands that go out before their
 * delta is ready carry the full image only. A failed build is remembered (no retry storm).
 */
export class DeltaCache {
  private queue: Promise<void> = Promise.resolve();
  private readonly pending = new Set<Promise<void>>();
  private readonly asked = new Set<string>();
  private readonly stopping = new AbortController();

  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: { storage: FirmwareStorage; options?: DeltaCacheOptions },
  ) {}

  get maxImageBytes(): number {
    return this.area.options?.maxImageBytes ?? DEFAULT_DELTA_MAX_IMAGE_BYTES;
  }

  /** Starts the builds a new deployment needs (never throws; work continues in the background). */
  prepareDeployment(deploymentId: string): void {
    this.track(
      pairsOfDeployment(this.deps.knex, deploymentId).then((pairs) => {
        for (const pair of pairs) this.ensure(pair);
      }),
    );
  }

  /** Asks for a pair's delta: builds it here unless a row exists (built, building elsewhere, refused). */
  ensure(pair: DeltaPair): void {
    const key = `${pair.fromSha256}:${pair.toSha256}`;
    // Once per process and pair: the database decides between processes.
    if (this.asked.has(key)) return;
    this.asked.add(key);
    this.track(this.claimAndBuild(pair).finally(() => this.asked.delete(key)));
  }

  /**
   * The deltas the commands of these updates can offer now (ready, smaller than the image);
   * records on each update what its command offers, and asks for the deltas still missing (a
   * hop of an upgrade path, a device that changed version since the deployment was created).
   */
  async offers(updateIds: string[]): Promise<Map<string, DeltaOffer>> {
    // By key from a page's ids: one plan for every page size (offerCandidates).
    const byKey = this.deps.plannedOnce ?? this.deps.knex;
    const candidates = await offerCandidates(byKey, { updateIds, format: DELTA_FORMAT });
    const offers = new Map<string, DeltaOffer>();
    for (const c of candidates) {
      const d = c.delta;
      if (!d) this.ensure(c.pair);
      else if (d.status === 'ready' && d.sha256 && d.size !== null && d.size < c.pair.toSize)
        offers.set(c.updateId, {
          deltaId: d.id,
          from: c.fromVersion,
          sha256: d.sha256,
          size: d.size,
          format: DELTA_FORMAT,
        });
      // A build whose process stopped is taken over; an image refused under a lower size cap is built now.
      else if (d.status === 'building' || d.status === 'too_large') this.ensure(c.pair);
    }
    await recordOffers(
      byKey,
      updateIds.map((id) => ({ updateId: id, deltaId: offers.get(id)?.deltaId ?? null })),
    );
    return offers;
  }

  /** The dry run's deltas (delta-preview.ts); starts the builds it lists as `will_be_built`. */
  preview(input: Omit<Parameters<typeof previewDeltas>[1], 'maxImageBytes' | 'ensure'>): Promise<DeltaPreview[]> {
    return previewDeltas(this.deps.knex, {
      ...input,
      maxImageBytes: this.maxImageBytes,
      ensure: (p) => this.ensure(p),
    });
  }

  /** Resolves when the builds started so far have finished (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /**
   * Stops for a service stop: running builds end at once and nothing new starts. A build cut
   * short gives its claim back (the row goes), so the next process to need the delta builds it,
   * instead of remembering a failure or leaving a `building` row for 15 minutes.
   */
  async close(): Promise<void> {
    this.stopping.abort();
    await this.idle();
  }

  private track(work: Promise<void>): void {
    if (this.stopping.signal.aborted) {
      void work.catch(() => undefined);
      return;
    }
    const p = work.catch((err: unknown) => this.deps.logger.error({ err }, 'delta build failed'));
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  private async claimAndBuild(pair: DeltaPair): Promise<void> {
    const { knex, clock } = this.deps;
    const now = clock.now();
    const tooLarge = Math.max(pair.fromSize, pair.toSize) > this.maxImageBytes;
    const id = newId();
    if (await insertDelta(knex, { id, pair, format: DELTA_FORMAT, status: tooLarge ? 'too_large' : 'building', now })) {
      if (!tooLarge) await this.enqueue(id, pair);
      return;
    }
    const staleBefore = new Date(now.getTime() - (this.area.options?.staleBuildMs ?? 15 * 60_000));
    const taken = await reclaimBuild(knex, { pair, format: DELTA_FORMAT, staleBefore, now, fits: !tooLarge });
    if (taken) await this.enqueue(taken, pair);
  }

  /** One build at a time per process: each holds several times the image in memory. */
  private enqueue(id: string, pair: DeltaPair): Promise<void> {
    const run = this.queue.then(() =>
      this.stopping.signal.aborted ? releaseBuild(this.deps.knex, id) : this.build(id, pair),
    );
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async build(id: string, pair: DeltaPair): Promise<void> {
    const { knex, clock, logger } = this.deps;
    const { storage } = this.area;
    const build =
      this.area.options?.build ?? ((job: DeltaJob, signal: AbortSignal) => buildDeltaInWorker(job, { signal }));
    try {
      const built = await build(
        { oldPath: storage.pathFor(pair.fromKey), newPath: storage.pathFor(pair.toKey) },
        this.stopping.signal,
      );
      if (this.stopping.signal.aborted) throw new Error('the service stops');
      const temp = await storage.writeTemp(Readable.from([Buffer.from(built.patch)]), Number.MAX_SAFE_INTEGER);
      const storageKey = await storage.commit(temp, id);
      await finishDelta(knex, {
        id,
        status: 'ready',
        storageKey,
        size: temp.size,
        sha256: temp.sha256,
        buildMs: built.buildMs,
        now: clock.now(),
      });
      logger.info({ deltaId: id, size: temp.size, fullSize: pair.toSize, buildMs: built.buildMs }, 'delta built');
    } catch (err) {
      if (this.stopping.signal.aborted) {
        await releaseBuild(knex, id);
        return;
      }
      logger.warn({ err, deltaId: id }, 'delta build failed; devices get the full image');
      await finishDelta(knex, { id, status: 'failed', error: (err as Error).message, now: clock.now() });
    }
  }
}
