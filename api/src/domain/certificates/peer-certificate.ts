import { X509Certificate as NodeX509Certificate } from 'node:crypto';
import { sha256Hex } from '../shared/secrets';
import type { DeviceCaCertificate } from './device-ca';
import { x509 } from './x509';

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
  | { ok: true; fingerprintSha256: string; commonName: string }
  | { ok: false; reason: PeerCertificateRefusal };

/** Larger than any certificate we issue by far; bounds the parsing work a client can cause. */
const MAX_CERTIFICATE_BYTES = 16 * 1024;

/**
 * What the certificate itself proves, before the database is asked: signed by our device CA
 * (not a CA itself), within its validity at `now`, with exactly one subject CN.
 */
export function checkPeerCertificate(input: { certificate: PeerCertificate; ca: DeviceCaCertificate; now: Date }): PeerCertificateCheck {
  const raw = input.certificate.raw;
  if (!Buffer.isBuffer(raw) || raw.length === 0 || raw.length > MAX_CERTIFICATE_BYTES) return { ok: false, reason: 'certificate_invalid' };
  let node: NodeX509Certificate;
  let parsed: x509.X509Certificate;
  try {
    node = new NodeX509Certificate(raw);
    parsed = new x509.X509Certificate(new Uint8Array(raw));
  } catch {
    return { ok: false, reason: 'certificate_invalid' };
  }
  // checkIssued compares names and key identifiers; verify checks the signature itself.
  let signed = false;
  try {
    signed = node.checkIssued(input.ca.node) && node.verify(input.ca.node.publicKey);
  } catch {
    signed = false;
  }
  if (!signed || node.ca) return { ok: false, reason: 'certificate_untrusted' };
  const now = input.now.getTime();
  if (now < parsed.notBefore.getTime() || now > parsed.notAfter.getTime()) return { ok: false, reason: 'certificate_expired' };
  const names = parsed.subjectName.getField('CN');
  if (names.length !== 1) return { ok: false, reason: 'certificate_untrusted' };
  return { ok: true, fingerprintSha256: sha256Hex(raw), commonName: names[0]! };
}

/** `AB:CD:...` (openssl, node's fingerprint256) or plain hex, any case, to our lowercase form; null if not SHA-256 hex. */
export function normalizeFingerprint(value: string): string | null {
  const hex = value.replace(/:/g, '').toLowerCase();
  return /^[0-9a-f]{64}$/.test(hex) ? hex : null;
}
