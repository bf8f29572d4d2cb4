import type { DeviceCertificate } from '#core/certificates/device-certificate.service';

/** Domain certificate -> wire format (snake_case; `certificate` is the PEM). */
export function presentCertificate(c: DeviceCertificate) {
  return {
    serial: c.serial,
    certificate: c.certificatePem,
    fingerprint_sha256: c.fingerprintSha256,
    serial_number: c.serialNumber,
    key_algorithm: c.keyAlgorithm,
    not_before: c.notBefore,
    not_after: c.notAfter,
    created_at: c.createdAt,
    revoked_at: c.revokedAt,
    revoked_reason: c.revokedReason,
  };
}
