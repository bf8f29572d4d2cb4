import { describe, it, expect } from 'vitest';
import { configPayload, otaCommandPayload, progressReport } from '#broker/device-messages';
import { ReceivedOtaProgress } from '#protocol/payloads';

const job = {
  jobId: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11',
  version: '1.2.0',
  model: 'LX-200',
  url: 'https://fleet.example/firmware/download/x?e=1&s=y',
  sha256: 'a'.repeat(64),
  size: 10,
};
const signature = { value: `${'A'.repeat(86)}==`, keyId: '0123456789abcdef' };

describe('domain commands to protocol payloads', () => {
  it('maps an OTA job to the wire form, field for field', () => {
    expect(JSON.stringify(otaCommandPayload(job))).toBe(
      '{"job_id":"6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11","version":"1.2.0","model":"LX-200","url":"https://fleet.example/firmware/download/x?e=1&s=y","sha256":"' +
        'a'.repeat(64) +
        '","size":10}',
    );
    expect(otaCommandPayload({ ...job, signature })).toMatchObject({
      signature: signature.value,
      key_id: signature.keyId,
    });
  });

  it.each([
    ['a version outside the grammar', { ...job, version: 'v1' }],
    ['a URL that is not http(s)', { ...job, url: 'ftp://fleet.example/x' }],
    ['an upper-case digest', { ...job, sha256: 'A'.repeat(64) }],
    ['a negative size', { ...job, size: -1 }],
    ['an empty model', { ...job, model: '' }],
    ['a download link over the protocol limit', { ...job, url: `https://fleet.example/${'x'.repeat(1100)}` }],
    ['a key id of another form', { ...job, signature: { ...signature, keyId: 'key-1' } }],
  ])('refuses to send %s', (_name, bad) => {
    expect(() => otaCommandPayload(bad)).toThrow();
  });

  it("maps a configuration with the service's time, and refuses a version outside 1..2147483647", () => {
    const now = new Date('2026-11-27T03:00:00.123Z');
    expect(configPayload({ version: 3, config: { dim_level: 40 } }, now)).toEqual({
      version: 3,
      config: { dim_level: 40 },
      server_time: '2026-11-27T03:00:00.123Z',
    });
    expect(() => configPayload({ version: 0, config: {} })).toThrow();
    expect(() => configPayload({ version: 2_147_483_648, config: {} })).toThrow();
  });

  it.each([
    [
      { job_id: 'j', state: 'downloading', progress: 42 },
      { jobId: 'j', state: 'downloading', progress: 42 },
    ],
    [
      { job_id: 'j', state: 'failed', error: 'sha256 mismatch' },
      { jobId: 'j', state: 'failed', error: 'sha256 mismatch' },
    ],
    [
      { job_id: 'j', state: 'succeeded' },
      { jobId: 'j', state: 'succeeded' },
    ],
    [
      { job_id: 'j', state: 'failed', error: 'sha256 mismatch', error_code: 'digest_mismatch' },
      { jobId: 'j', state: 'failed', error: 'sha256 mismatch', errorCode: 'digest_mismatch' },
    ],
    // A code this service does not know (a newer module's) is `other`, and flagged to be counted.
    [
      { job_id: 'j', state: 'rolled_back', error_code: 'brownout' },
      { jobId: 'j', state: 'rolled_back', errorCode: 'other', unknownErrorCode: true },
    ],
    [
      { job_id: 'j', state: 'failed', error_code: 7 },
      { jobId: 'j', state: 'failed', errorCode: 'other', unknownErrorCode: true },
    ],
  ])('maps the progress report %j to the domain', (wire, domain) => {
    expect(progressReport(ReceivedOtaProgress.parse(wire))).toEqual(domain);
  });
});
