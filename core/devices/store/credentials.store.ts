import type { Knex } from 'knex';
import type { DeviceIdentity } from '../device-types';
import type { Db } from '../../db/db';

/** MQTT password hashes (`device_credentials`, one row per device) and the reads that check them. */

export async function insertCredentials(
  trx: Knex.Transaction,
  input: { now: Date; credentials: Array<{ deviceId: string; secretHash: string }> },
): Promise<void> {
  await trx('device_credentials').insert(
    input.credentials.map((c) => ({ device_id: c.deviceId, secret_hash: c.secretHash, rotated_at: input.now })),
  );
}

/** Replaces the device's password hash (rotation). */
export async function replaceCredential(
  trx: Knex.Transaction,
  input: { deviceId: string; secretHash: string; now: Date },
): Promise<void> {
  await trx('device_credentials')
    .insert({ device_id: input.deviceId, secret_hash: input.secretHash, rotated_at: input.now })
    .onConflict('device_id')
    .merge(['secret_hash', 'rotated_at']);
}

/** A claimed device and the hash of its current password. */
export interface StoredCredential {
  device: DeviceIdentity;
  secretHash: string;
}

/** The claimed devices among these serials with their password hashes (one statement for a batch of lookups). */
export async function selectCredentialsBySerials(db: Db, input: { serials: string[] }): Promise<StoredCredential[]> {
  const rows: CredentialRow[] = await db('devices as d')
    .join('device_credentials as c', 'c.device_id', 'd.id')
    .whereRaw('d.serial = ANY(?::text[])', [input.serials])
    .select('d.id', 'd.account_id', 'd.serial', 'd.desired_config_version', 'd.desired_config', 'c.secret_hash');
  return rows.map((r) => ({ device: toDeviceIdentity(r), secretHash: r.secret_hash }));
}

/** Columns of a device that a connection's session keeps. */
interface DeviceIdentityRow {
  id: string;
  account_id: string;
  serial: string;
  desired_config_version: number | string;
  /** jsonb: an object from pg, text from some drivers. */
  desired_config: Record<string, unknown> | string;
}

interface CredentialRow extends DeviceIdentityRow {
  secret_hash: string;
}

function toDeviceIdentity(row: DeviceIdentityRow): DeviceIdentity {
  return {
    id: row.id,
    accountId: row.account_id,
    serial: row.serial,
    desiredConfigVersion: Number(row.desired_config_version),
    desiredConfig:
      typeof row.desired_config === 'string'
        ? (JSON.parse(row.desired_config) as Record<string, unknown>)
        : row.desired_config,
  };
}

interface CertificateCredentialRow {
  fingerprint_sha256: string;
  revoked_at: Date | null;
  /** Of the device row the certificate belongs to; null once that device is gone. */
  id: string | null;
  account_id: string | null;
  serial: string | null;
  desired_config_version: number | string | null;
  desired_config: Record<string, unknown> | string | null;
}

/** A certificate this service issued, and the device it belongs to (null once unclaimed). */
export interface StoredCertificateCredential {
  fingerprintSha256: string;
  revokedAt: Date | null;
  device: DeviceIdentity | null;
}

/** The issued certificates among these fingerprints, each with its device if still claimed under the same serial. */
export async function selectCertificateCredentials(
  db: Db,
  input: { fingerprints: string[] },
): Promise<StoredCertificateCredential[]> {
  // The device is matched by id and serial: a certificate never follows its serial to a later claim.
  const rows: CertificateCredentialRow[] = await db('device_certificates as c')
    .leftJoin('devices as d', function () {
      this.on('d.id', '=', 'c.device_id').andOn('d.serial', '=', 'c.serial');
    })
    .whereRaw('c.fingerprint_sha256 = ANY(?::text[])', [input.fingerprints])
    .select(
      'c.fingerprint_sha256',
      'c.revoked_at',
      'd.id',
      'd.account_id',
      'd.serial',
      'd.desired_config_version',
      'd.desired_config',
    );
  return rows.map((r) => ({
    fingerprintSha256: r.fingerprint_sha256,
    revokedAt: r.revoked_at,
    device:
      r.id === null || r.account_id === null || r.serial === null
        ? null
        : toDeviceIdentity({
            id: r.id,
            account_id: r.account_id,
            serial: r.serial,
            desired_config_version: r.desired_config_version ?? 0,
            desired_config: r.desired_config ?? {},
          }),
  }));
}
