import { createCipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ServerSecret } from '#core/shared/server-secret';
import { DownloadLinkSigner } from '#core/firmware/download-links';

/**
 * The purpose keys are held as KeyObjects (faster on Node 24), but what they sign and seal is
 * the contract: links and sealed values made before must still verify and open, and a device
 * can check a link's form against docs/ota.md's formula with the raw key bytes.
 */
const master = Buffer.alloc(32, 9);
const purposeBytes = (purpose: string) =>
  Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), `fleet:${purpose}`, 32));

describe('server secret purpose keys', () => {
  it('signs download links as base64url(HMAC-SHA256(key, "v1.<job>.<device>.<firmware>.<e>"))', () => {
    const signer = new DownloadLinkSigner(new ServerSecret(master).key('firmware-downloads'));
    const claims = { jobId: 'job-1', deviceId: 'dev-1', firmwareVersionId: 'fw-1', expiresAt: 1_800_000_000 };
    const expected = createHmac('sha256', purposeBytes('firmware-downloads'))
      .update('v1.job-1.dev-1.fw-1.1800000000')
      .digest('base64url');
    expect(signer.signature(claims)).toBe(expected);
    // A signer given the bytes (tests, a key from elsewhere) signs the same.
    expect(new DownloadLinkSigner(purposeBytes('firmware-downloads')).verify(claims, expected)).toBe(true);
    expect(signer.verify({ ...claims, deviceId: 'dev-2' }, expected)).toBe(false);
  });

  it('opens a value sealed with the raw purpose key bytes, and seals values it opens', () => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', purposeBytes('webhook-secrets'), iv);
    const body = Buffer.concat([cipher.update('whsec_stored-before', 'utf8'), cipher.final()]);
    const sealed = ['v1', iv, cipher.getAuthTag(), body]
      .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
      .join('.');
    const secret = new ServerSecret(master);
    expect(secret.decrypt('webhook-secrets', sealed)).toBe('whsec_stored-before');
    expect(secret.decrypt('webhook-secrets', secret.encrypt('webhook-secrets', 'again'))).toBe('again');
    expect(() => secret.decrypt('firmware-downloads', sealed)).toThrow();
  });
});
