import { describe, expect, it } from 'vitest';
import { judgeDownload, isWellFormedLink, type LinkedJob, type PresentedLink } from '#core/firmware/download-rules';
import { DownloadLinkSigner } from '#core/firmware/download-links';
import { DomainError } from '#core/shared/errors';
import { UPDATE_STATES, IN_FLIGHT_STATES } from '#core/deployments/deployment-types';

const links = new DownloadLinkSigner(Buffer.alloc(32, 7));
const JOB_ID = '11111111-1111-4111-8111-111111111111';
const NOW = new Date('2024-01-15T12:00:00Z');
const IN_AN_HOUR = Math.floor(NOW.getTime() / 1000) + 3600;

const job = (over: Partial<LinkedJob> = {}): LinkedJob => ({
  deviceId: 'dev-1',
  firmwareVersionId: 'fw-1',
  state: 'downloading',
  storageKey: 'fw/1',
  size: 1234,
  sha256: 'ab'.repeat(32),
  version: '2.0.0',
  ...over,
});
/** A link as the engine signs it for `job()` (its device and binary), valid until `expiresAt`. */
const linkFor = (
  expiresAt = IN_AN_HOUR,
  claims: { deviceId?: string; firmwareVersionId?: string } = {},
): PresentedLink => ({
  jobId: JOB_ID,
  expiresAt,
  signature: links.signature({
    jobId: JOB_ID,
    deviceId: claims.deviceId ?? 'dev-1',
    firmwareVersionId: claims.firmwareVersionId ?? 'fw-1',
    expiresAt,
  }),
});

/** The error code a judgement throws, or `granted`. */
function outcome(link: PresentedLink, j: LinkedJob | undefined): string {
  try {
    judgeDownload({ link, job: j, links, now: NOW });
    return 'granted';
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
}

describe('firmware download links', () => {
  it('grant the binary of a job under way', () => {
    expect(judgeDownload({ link: linkFor(), job: job(), links, now: NOW })).toEqual({
      storageKey: 'fw/1',
      size: 1234,
      sha256: 'ab'.repeat(32),
    });
  });

  it.each<[string, PresentedLink, LinkedJob | undefined, string]>([
    ['a job id that is no uuid', { ...linkFor(), jobId: 'nope' }, job(), 'forbidden'],
    ['an expiry that is no integer', { ...linkFor(), expiresAt: 1.5 }, job(), 'forbidden'],
    ['an empty signature', { ...linkFor(), signature: '' }, job(), 'forbidden'],
    ['an overlong signature', { ...linkFor(), signature: 'x'.repeat(101) }, job(), 'forbidden'],
    ['an unknown job', linkFor(), undefined, 'forbidden'],
    [
      'a tampered signature',
      { ...linkFor(), signature: linkFor().signature.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')) },
      job(),
      'forbidden',
    ],
    ['a moved expiry', { ...linkFor(), expiresAt: IN_AN_HOUR + 3600 }, job(), 'forbidden'],
    ['a link signed for another device', linkFor(IN_AN_HOUR, { deviceId: 'dev-2' }), job(), 'forbidden'],
    ['a link signed for another binary', linkFor(IN_AN_HOUR, { firmwareVersionId: 'fw-2' }), job(), 'forbidden'],
    ['an expired link', linkFor(Math.floor(NOW.getTime() / 1000) - 1), job(), 'gone'],
    ['a link expiring this second', linkFor(Math.floor(NOW.getTime() / 1000)), job(), 'granted'],
    ['a deleted binary', linkFor(), job({ storageKey: null }), 'gone'],
    // Forbidden before gone: an expired link of a foreign job says nothing about that job.
    [
      'an expired link of another device',
      linkFor(Math.floor(NOW.getTime() / 1000) - 1, { deviceId: 'dev-2' }),
      job(),
      'forbidden',
    ],
  ])('%s: %s', (_, link, j, expected) => {
    expect(outcome(link, j)).toBe(expected);
  });

  it.each(
    UPDATE_STATES.map(
      (state) => [state, (IN_FLIGHT_STATES as readonly string[]).includes(state) ? 'granted' : 'gone'] as const,
    ),
  )('a %s job: %s', (state, expected) => {
    expect(outcome(linkFor(), job({ state }))).toBe(expected);
  });

  it.each([
    [linkFor(), true],
    [{ ...linkFor(), jobId: 'nope' }, false],
    [{ ...linkFor(), expiresAt: Number.NaN }, false],
    [{ ...linkFor(), signature: '' }, false],
  ])('tell a link that cannot be ours before any read: %j -> %s', (link, ok) => {
    expect(isWellFormedLink(link)).toBe(ok);
  });
});
