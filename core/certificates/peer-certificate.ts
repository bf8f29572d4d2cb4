import { X509Certificate as NodeX509Certificate } from 'node:crypto';
import { sha256Hex } from '../shared/secrets';
import type { DeviceCaCertificate } from './device-ca';

/**
 * The client certificate as node:tls hands it over (`socket.getPeerCertificate(true)`). Only the
 * DER in `raw` is read: every other field of that object is derived from it, and a caller that
 * builds the object by hand cannot make us trust anything but the bytes.
 */
export interface PeerCertificate {
  raw?: Buffer | undefined;
}

export type PeerCertificateRefusal = 'certificate_invalid' | 'certificate_untrusted' | 'certificate_expired';

export type PeerCertificateCheck =
  { ok: true; fingerprintSha256: string; commonName: string } | { ok: false; reason: PeerCertificateRefusal };

/** Larger than any certificate we issue by far; bounds the parsing work a client can cause. */
const MAX_CERTIFICATE_BYTES = 16 * 1024;

/**
 * What the certificate itself proves, before the database is asked: signed by our device CA
 * (not a CA itself), within its validity at `now`, with exactly one subject CN.
 */
export function checkPeerCertificate(input: {
  certificate: PeerCertificate;
  ca: DeviceCaCertificate;
  now: Date;
}): PeerCertificateCheck {
  const raw = input.certificate.raw;
  if (!Buffer.isBuffer(raw) || raw.length === 0 || raw.length > MAX_CERTIFICATE_BYTES)
    return { ok: false, reason: 'certificate_invalid' };
  // node:crypto alone (native): a second parse with @peculiar/x509 was 130 of the 310 µs this
  // check took per connection (bench/connections.bench.ts).
  let node: NodeX509Certificate;
  try {
    node = new NodeX509Certificate(raw);
  } catch {
    return { ok: false, reason: 'certificate_invalid' };
  }
  // checkIssued compares names and key identifiers; verify checks the signature itself.
  let signed: boolean;
  try {
    signed = node.checkIssued(input.ca.node) && node.verify(input.ca.node.publicKey);
  } catch {
    signed = false;
  }
  if (!signed || node.ca) return { ok: false, reason: 'certificate_untrusted' };
  const now = input.now.getTime();
  const notBefore = Date.parse(node.validFrom);
  const notAfter = Date.parse(node.validTo);
  if (!(now >= notBefore && now <= notAfter)) return { ok: false, reason: 'certificate_expired' };
  // One `CN=` line in node's subject text. A CN holding a line break or an escape could never
  // equal a serial (letters, digits and . _ : - only), which the caller compares it with.
  const names = node.subject.split('\n').filter((line) => line.startsWith('CN='));
  if (names.length !== 1) return { ok: false, reason: 'certificate_untrusted' };
  return { ok: true, fingerprintSha256: sha256Hex(raw), commonName: names[0]!.slice(3) };
}

/** `AB:CD:...` (openssl, node's fingerprint256) or plain hex, any case, to our lowercase form; null if not SHA-256 hex. */
export function normalizeFingerprint(value: string): string | null {
  const hex = value.replace(/:/g, '').toLowerCase();
  return /^[0-9a-f]{64}$/.test(hex) ? hex : null;
}
