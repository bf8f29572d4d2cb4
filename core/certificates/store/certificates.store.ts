import type { Knex } from 'knex';
import { sqlList } from '../../shared/sql-list';
import type { IssuedCertificate } from '../certificate-issuer';
import type { DeviceCertificate, RevocationReason } from '../device-certificate-types';
import type { Db } from '../../db/db';

/** Certificates issued to devices (`device_certificates`), recorded by SHA-256 fingerprint. */

interface CertificateRow {
  fingerprint_sha256: string;
  serial: string;
  serial_number: string;
  key_algorithm: string;
  certificate_pem: string;
  not_before: Date | string;
  not_after: Date | string;
  created_at: Date | string;
  revoked_at: Date | string | null;
  revoked_reason: RevocationReason | null;
}

const COLUMNS: string[] = [
  'fingerprint_sha256',
  'serial',
  'serial_number',
  'key_algorithm',
  'certificate_pem',
  'not_before',
  'not_after',
  'created_at',
  'revoked_at',
  'revoked_reason',
];

/** The reason an administrator's revocation records. */
const REVOKED: RevocationReason[] = ['revoked'];

const iso = (value: Date | string): string => new Date(value).toISOString();

function toCertificate(row: CertificateRow): DeviceCertificate {
  return {
    serial: row.serial,
    fingerprintSha256: row.fingerprint_sha256,
    serialNumber: row.serial_number,
    keyAlgorithm: row.key_algorithm,
    certificatePem: row.certificate_pem,
    notBefore: iso(row.not_before),
    notAfter: iso(row.not_after),
    createdAt: iso(row.created_at),
    revokedAt: row.revoked_at === null ? null : iso(row.revoked_at),
    revokedReason: row.revoked_reason,
  };
}

export async function insertCertificates(
  db: Db,
  input: { accountId: string; now: Date; certificates: Array<{ deviceId: string; issued: IssuedCertificate }> },
): Promise<DeviceCertificate[]> {
  if (input.certificates.length === 0) return [];
  const rows: CertificateRow[] = await db('device_certificates')
    .insert(
      input.certificates.map(({ deviceId, issued }) => ({
        fingerprint_sha256: issued.fingerprintSha256,
        account_id: input.accountId,
        device_id: deviceId,
        serial: issued.serial,
        serial_number: issued.serialNumber,
        key_algorithm: issued.keyAlgorithm,
        certificate_pem: issued.pem,
        not_before: issued.notBefore,
        not_after: issued.notAfter,
        created_at: input.now,
      })),
    )
    .returning(COLUMNS);
  return rows.map(toCertificate);
}

/** Every certificate of one device, newest first (revoked ones included). */
export async function selectCertificatesOfDevice(
  db: Db,
  input: { accountId: string; deviceId: string },
): Promise<DeviceCertificate[]> {
  const rows: CertificateRow[] = await db('device_certificates')
    .where({ account_id: input.accountId, device_id: input.deviceId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'fingerprint_sha256', order: 'asc' },
    ])
    .select(COLUMNS);
  return rows.map(toCertificate);
}

/**
 * Revokes one certificate of a device; revoking it again keeps the first time. Null when the
 * device has no certificate with that fingerprint.
 */
export async function revokeCertificate(
  trx: Knex.Transaction,
  input: { accountId: string; deviceId: string; fingerprint: string; now: Date },
): Promise<{ certificate: DeviceCertificate; newlyRevoked: boolean } | null> {
  const before: { revoked_at: Date | null } | undefined = await trx('device_certificates')
    .where({ account_id: input.accountId, device_id: input.deviceId, fingerprint_sha256: input.fingerprint })
    .forUpdate()
    .first('revoked_at');
  if (!before) return null;
  const [row]: CertificateRow[] = await trx('device_certificates')
    .where({ fingerprint_sha256: input.fingerprint })
    .update({
      revoked_at: trx.raw('coalesce(revoked_at, ?)', [input.now]),
      revoked_reason: trx.raw(`coalesce(revoked_reason, ${sqlList(REVOKED)})`),
    })
    .returning(COLUMNS);
  return { certificate: toCertificate(row!), newlyRevoked: before.revoked_at === null };
}

/** Revokes every certificate of a device (unclaim); returns the fingerprints it revoked. */
export async function revokeCertificatesOfDevice(
  trx: Knex.Transaction,
  input: { deviceId: string; now: Date; reason: RevocationReason },
): Promise<string[]> {
  const rows: Array<{ fingerprint_sha256: string }> = await trx('device_certificates')
    .where({ device_id: input.deviceId })
    .whereNull('revoked_at')
    .update({ revoked_at: input.now, revoked_reason: input.reason })
    .returning('fingerprint_sha256');
  return rows.map((r) => r.fingerprint_sha256);
}

/**
 * Revokes every certificate of a device but `keep` (a renewal that completed): returns the
 * fingerprints it revoked.
 */
export async function revokeOtherCertificatesOfDevice(
  trx: Knex.Transaction,
  input: { deviceId: string; keep: string; now: Date; reason: RevocationReason },
): Promise<string[]> {
  const rows: Array<{ fingerprint_sha256: string }> = await trx('device_certificates')
    .where({ device_id: input.deviceId })
    .whereNot({ fingerprint_sha256: input.keep })
    .whereNull('revoked_at')
    .update({ revoked_at: input.now, revoked_reason: input.reason })
    .returning('fingerprint_sha256');
  return rows.map((r) => r.fingerprint_sha256);
}

/** Whether the device holds a certificate that is not revoked (expired ones count). */
export async function hasUnrevokedCertificate(db: Db, input: { deviceId: string }): Promise<boolean> {
  const row: { fingerprint_sha256: string } | undefined = await db('device_certificates')
    .where({ device_id: input.deviceId })
    .whereNull('revoked_at')
    .first('fingerprint_sha256');
  return row !== undefined;
}

/** One certificate of a device by fingerprint (revoked or not), or null. */
export async function selectCertificateOfDevice(
  db: Db,
  input: { deviceId: string; fingerprint: string },
): Promise<DeviceCertificate | null> {
  const row: CertificateRow | undefined = await db('device_certificates')
    .where({ device_id: input.deviceId, fingerprint_sha256: input.fingerprint })
    .first(COLUMNS);
  return row ? toCertificate(row) : null;
}
