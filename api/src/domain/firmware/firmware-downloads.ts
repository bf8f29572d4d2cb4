import DataLoader from 'dataloader';
import type { ServiceDeps } from '../service-deps';
import type { DownloadLinkSigner } from './download-links';
import { DomainError } from '../shared/errors';
import { isUuid } from '../shared/ids';

/** What a valid link gives access to: one binary, as the firmware record describes it. */
export interface DownloadGrant {
  storageKey: string;
  size: number;
  sha256: string;
}

interface JobRow {
  id: string;
  device_id: string;
  firmware_version_id: string;
  state: string;
  sha256: string;
  size: number | string;
  storage_key: string | null;
  version: string;
}

/** Update states in which the device may fetch its image. */
const DOWNLOADABLE = new Set(['sent', 'downloading', 'installing', 'rebooting']);

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
  private readonly jobs: DataLoader<string, JobRow | undefined>;

  constructor(
    private readonly deps: ServiceDeps,
    private readonly area: { links: DownloadLinkSigner },
  ) {
    this.jobs = new DataLoader<string, JobRow | undefined>(
      async (ids) => {
        // One array parameter rather than a list of up to 500 (parsed and planned each time).
        const rows = (await this.deps.knex.raw(
          `SELECT u.id, u.device_id, u.firmware_version_id, u.state, f.sha256, f.size, f.storage_key, f.version
             FROM device_updates u JOIN firmware_versions f ON f.id = u.firmware_version_id
            WHERE u.id = ANY(?::uuid[])`,
          [[...ids]],
        )).rows as JobRow[];
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
    if (!row || !this.area.links.verify({ jobId, deviceId: row.device_id, firmwareVersionId: row.firmware_version_id, expiresAt }, signature)) {
      throw new DomainError('forbidden', 'This download link is not valid for this job.');
    }
    if (expiresAt * 1000 < this.deps.clock.now().getTime()) throw new DomainError('gone', 'This download link expired; the device gets a fresh one when the command is re-sent.');
    if (!DOWNLOADABLE.has(row.state)) throw new DomainError('gone', `The update is ${row.state}; nothing to download.`);
    if (!row.storage_key) throw new DomainError('gone', `The binary of firmware ${row.version} was deleted.`);
    return { storageKey: row.storage_key, size: Number(row.size), sha256: row.sha256 };
  }
}
