import { DomainError } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { IN_FLIGHT_STATES, type UpdateState } from '../deployments/deployment-types';
import type { DownloadLinkSigner } from './download-links';
import type { DeltaDownloadJob } from './store/firmware-deltas.store';

/** What a valid link gives access to: one binary, as the firmware record describes it. */
export interface DownloadGrant {
  storageKey: string;
  size: number;
  sha256: string;
}

/** A presented link: the job in its path, `e` and `s` of its query. */
export interface PresentedLink {
  jobId: string;
  expiresAt: number;
  signature: string;
}

/** What the link's job is now (read for each request, never cached). */
export interface LinkedJob {
  deviceId: string;
  firmwareVersionId: string;
  state: UpdateState;
  storageKey: string | null;
  size: number;
  sha256: string;
  version: string;
}

/** Update states in which the device may fetch its image: a command went out, no final answer came. */
const DOWNLOADABLE = new Set<UpdateState>(IN_FLIGHT_STATES);

/** Whether the link can be one of ours at all (checked before the job is read). */
export function isWellFormedLink(link: PresentedLink): boolean {
  return (
    isUuid(link.jobId) && Number.isInteger(link.expiresAt) && link.signature.length > 0 && link.signature.length <= 100
  );
}

/**
 * The rules of a device's firmware download link (docs/ota.md "Downloads"): signed for one job
 * (device and binary) until its expiry, and only while that job is under way. `forbidden` for an
 * invalid, tampered or foreign link and for an unknown job alike, so a link reveals nothing
 * about other jobs; `gone` once it expired, the job finished or the binary was deleted.
 */
export function judgeDownload(input: {
  link: PresentedLink;
  job: LinkedJob | undefined;
  links: DownloadLinkSigner;
  now: Date;
}): DownloadGrant {
  const { link, job } = input;
  if (!isWellFormedLink(link)) throw new DomainError('forbidden', 'This download link is not valid.');
  if (
    !job ||
    !input.links.verify(
      {
        jobId: link.jobId,
        deviceId: job.deviceId,
        firmwareVersionId: job.firmwareVersionId,
        expiresAt: link.expiresAt,
      },
      link.signature,
    )
  ) {
    throw new DomainError('forbidden', 'This download link is not valid for this job.');
  }
  if (link.expiresAt * 1000 < input.now.getTime())
    throw new DomainError(
      'gone',
      'This download link expired; the device gets a fresh one when the command is re-sent.',
    );
  if (!DOWNLOADABLE.has(job.state)) throw new DomainError('gone', `The update is ${job.state}; nothing to download.`);
  if (!job.storageKey) throw new DomainError('gone', `The binary of firmware ${job.version} was deleted.`);
  return { storageKey: job.storageKey, size: job.size, sha256: job.sha256 };
}

/**
 * The rules of a delta's link (docs/ota.md "Delta images"): signed for one job and the delta its
 * last command offered, until its expiry, while the job is under way. A job whose command no
 * longer offers that delta (the device fell back to the full image) answers `gone`; an invalid,
 * tampered or foreign link `forbidden`, as for full images.
 */
export function judgeDeltaDownload(input: {
  link: PresentedLink;
  job: DeltaDownloadJob | undefined;
  links: DownloadLinkSigner;
  now: Date;
}): DownloadGrant {
  const { link, job } = input;
  if (!isWellFormedLink(link)) throw new DomainError('forbidden', 'This download link is not valid.');
  const claims = (deltaId: string) => ({
    jobId: link.jobId,
    deviceId: job!.deviceId,
    deltaId,
    expiresAt: link.expiresAt,
  });
  if (!job || !job.deltaId || !input.links.verifyDelta(claims(job.deltaId), link.signature)) {
    throw new DomainError('forbidden', 'This download link is not valid for this job.');
  }
  if (link.expiresAt * 1000 < input.now.getTime())
    throw new DomainError(
      'gone',
      'This download link expired; the device gets a fresh one when the command is re-sent.',
    );
  if (!DOWNLOADABLE.has(job.state as UpdateState))
    throw new DomainError('gone', `The update is ${job.state}; nothing to download.`);
  if (!job.storageKey) throw new DomainError('gone', 'The delta is no longer offered; download the full image.');
  return { storageKey: job.storageKey, size: job.size, sha256: job.sha256 };
}
