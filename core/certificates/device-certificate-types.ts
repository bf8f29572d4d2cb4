/** Why a certificate stopped being accepted. Persisted values: never rename. */
export const REVOCATION_REASONS = [
  'revoked',
  'unclaimed',
  // Replaced by the certificate a renewal over MQTT issued (docs/device-certificates.md "Renewal").
  'superseded',
] as const;
export type RevocationReason = (typeof REVOCATION_REASONS)[number];

/** A certificate the service issued to a device, as services return it. */
export interface DeviceCertificate {
  serial: string;
  fingerprintSha256: string;
  serialNumber: string;
  keyAlgorithm: string;
  certificatePem: string;
  notBefore: string;
  notAfter: string;
  createdAt: string;
  revokedAt: string | null;
  revokedReason: RevocationReason | null;
}
