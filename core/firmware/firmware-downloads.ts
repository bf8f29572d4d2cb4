import DataLoader from 'dataloader';
import type { ServiceDeps } from '../service-deps';
import type { DownloadLinkSigner } from './download-links';
import {
  isWellFormedLink,
  judgeDeltaDownload,
  judgeDownload,
  type DownloadGrant,
  type PresentedLink,
} from './download-rules';
import { deltaDownloadJobs } from './store/firmware-deltas.store';
import { DomainError } from '../shared/errors';
import { downloadJobs, type DownloadJob } from './store/download-jobs.store';

export type { DownloadGrant } from './download-rules';

/** Serves the rules of download links (download-rules.ts) with the jobs they name. */
export class FirmwareDownloads {
  /**
   * A deployment's devices all ask at once: the jobs of the requests that arrive within 2 ms are
   * read in one statement (10,000 downloads were 10,000 queries queued for the 10-connection
   * pool, starving the OTA dispatcher's transactions). Not cached: each request sees the job's
   * current state.
   */
  private readonly jobs: DataLoader<string, DownloadJob | undefined>;

  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: { links: DownloadLinkSigner },
  ) {
    this.jobs = new DataLoader<string, DownloadJob | undefined>(
      async (ids) => {
        const rows = await downloadJobs(this.deps.knex, ids);
        const byId = new Map(rows.map((r) => [r.id, r]));
        return ids.map((id) => byId.get(id));
      },
      { cache: false, maxBatchSize: 500, batchScheduleFn: (run) => setTimeout(run, 2) },
    );
  }

  /**
   * The delta a delta link grants (the one the job's last command offered), or why not, like
   * `authorize`. Rare next to image downloads (one per device and update): no batching.
   */
  async authorizeDelta(link: PresentedLink): Promise<DownloadGrant> {
    if (!isWellFormedLink(link)) throw new DomainError('forbidden', 'This download link is not valid.');
    const [job] = await deltaDownloadJobs(this.deps.knex, [link.jobId]);
    return judgeDeltaDownload({ link, job, links: this.area.links, now: this.deps.clock.now() });
  }

  /** The binary a link grants, or why not: `forbidden` (invalid, tampered, foreign, unknown job) or `gone`. */
  async authorize(link: PresentedLink): Promise<DownloadGrant> {
    // A link that cannot be one of ours costs no query.
    if (!isWellFormedLink(link)) throw new DomainError('forbidden', 'This download link is not valid.');
    const job = await this.jobs.load(link.jobId);
    return judgeDownload({ link, job, links: this.area.links, now: this.deps.clock.now() });
  }
}
