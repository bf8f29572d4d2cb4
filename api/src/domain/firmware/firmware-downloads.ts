import DataLoader from 'dataloader';
import type { ServiceDeps } from '../service-deps';
import type { DownloadLinkSigner } from './download-links';
import { DomainError } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { IN_FLIGHT_STATES, type UpdateState } from '../deployments/deployment-types';
import { downloadJobs, type DownloadJob } from './store/download-jobs.store';

/** What a valid link gives access to: one binary, as the firmware record describes it. */
export interface DownloadGrant {
  storageKey: string;
  size: number;
  sha256: string;
}

/** Update states in which the device may fetch its image: a command went out, no final answer came. */
const DOWNLOADABLE = new Set<UpdateState>(IN_FLIGHT_STATES);

/**
 * The rules of a device's firmware download link (docs/ota.md "Downloads"): signed for one job
 * (device and binary) until its expiry, and only while that job is under way.
 */
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

  /** The binary a link grants, or why not: `forbidden` (invalid, tampered, foreign, unknown job) or `gone`. */
  async authorize(input: { jobId: string; expiresAt: number; signature: string }): Promise<DownloadGrant> {
    const { jobId, expiresAt, signature } = input;
    if (!isUuid(jobId) || !Number.isInteger(expiresAt) || signature.length === 0 || signature.length > 100) {
      throw new DomainError('forbidden', 'This download link is not valid.');
    }
    const row = await this.jobs.load(jobId);
    // Unknown jobs and bad signatures answer alike, so a link reveals nothing about other jobs.
    if (!row || !this.area.links.verify({ jobId, deviceId: row.deviceId, firmwareVersionId: row.firmwareVersionId, expiresAt }, signature)) {
      throw new DomainError('forbidden', 'This download link is not valid for this job.');
    }
    if (expiresAt * 1000 < this.deps.clock.now().getTime()) throw new DomainError('gone', 'This download link expired; the device gets a fresh one when the command is re-sent.');
    if (!DOWNLOADABLE.has(row.state)) throw new DomainError('gone', `The update is ${row.state}; nothing to download.`);
    if (!row.storageKey) throw new DomainError('gone', `The binary of firmware ${row.version} was deleted.`);
    return { storageKey: row.storageKey, size: row.size, sha256: row.sha256 };
  }
}
