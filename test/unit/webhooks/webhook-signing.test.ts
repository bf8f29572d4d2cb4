import { describe, it, expect } from 'vitest';
import { signatureHeader, verifySignature } from '#core/webhooks/webhook-signing';

/**
 * A known vector, computed outside this code base:
 *   printf '%s' "$t.$body" | openssl dgst -sha256 -hmac "$secret"
 * A receiver that implements the documented scheme gets the same header.
 */
const secret = 'whsec_test_secret_0123456789';
const t = 1767225600;
const body =
  '{"id":"4f6c1a52-7f1e-4f7a-9d38-0c5d2a1f9b10","type":"device.online","occurred_at":"2026-01-01T00:00:00.000Z","data":{"serial":"SN-0001"}}';
const header = `t=${t},v1=8af196eff715ed95439307713c50ea5a08ef8fac69b40013c25d6c815a40297f`;

describe('webhook signing', () => {
  it('signs "t.body" with HMAC-SHA256 of the whole secret: Fleet-Signature t=..,v1=..', () => {
    expect(signatureHeader(secret, body, t)).toBe(header);
  });

  const other = signatureHeader('whsec_another', body, t).split(',')[1]!;
  it.each([
    ['the signed request', header, body, t, true],
    ['299 s later', header, body, t + 299, true],
    ['300 s later (the tolerance)', header, body, t + 300, true],
    ['301 s later', header, body, t + 301, false],
    ['a clock 300 s behind the sender', header, body, t - 300, true],
    ['another body', header, body.replace('SN-0001', 'SN-0002'), t, false],
    ['another timestamp with the same MAC', header.replace(`t=${t}`, `t=${t + 1}`), body, t, false],
    ['a rotated secret: any v1 may match', `t=${t},${other},${header.split(',')[1]}`, body, t, true],
    ['only a MAC of another secret', `t=${t},${other}`, body, t, false],
    ['spaces around the parts', `t=${t}, v1=${header.split('v1=')[1]}`, body, t, true],
    ['no timestamp', header.split(',')[1]!, body, t, false],
    ['no MAC', `t=${t}`, body, t, false],
    ['a MAC cut short', header.slice(0, -2), body, t, false],
    ['not hex', `t=${t},v1=zz`, body, t, false],
  ] as const)('verifies %s: %s', (_, given, signedBody, nowSeconds, valid) => {
    expect(verifySignature({ header: given, body: signedBody, secret, nowSeconds })).toBe(valid);
  });
});
