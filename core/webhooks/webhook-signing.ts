import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * docs/webhooks.md: `Fleet-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256
 * of "t.body">` keyed with the endpoint's secret (the whole `whsec_...` string, UTF-8), as
 * Stripe does. Receivers compare in constant time and reject timestamps older than 300 s.
 */
export const SIGNATURE_HEADER = 'Fleet-Signature';
export const SIGNATURE_TOLERANCE_S = 300;

export function signatureHeader(secret: string, body: string, timestampSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${timestampSeconds}.${body}`, 'utf8').digest('hex');
  return `t=${timestampSeconds},v1=${mac}`;
}

/** The receiver's side (documented in docs/webhooks.md; tests use their own copy). */
export function verifySignature(input: {
  header: string;
  body: string;
  secret: string;
  nowSeconds: number;
  toleranceSeconds?: number;
}): boolean {
  const parts = new Map<string, string[]>();
  for (const item of input.header.split(',')) {
    const eq = item.indexOf('=');
    if (eq <= 0) continue;
    const key = item.slice(0, eq).trim();
    parts.set(key, [...(parts.get(key) ?? []), item.slice(eq + 1).trim()]);
  }
  const t = Number(parts.get('t')?.[0]);
  if (!Number.isInteger(t) || Math.abs(input.nowSeconds - t) > (input.toleranceSeconds ?? SIGNATURE_TOLERANCE_S))
    return false;
  const expected = Buffer.from(
    createHmac('sha256', input.secret).update(`${t}.${input.body}`, 'utf8').digest('hex'),
    'hex',
  );
  return (parts.get('v1') ?? []).some((candidate) => {
    const given = Buffer.from(candidate, 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}
