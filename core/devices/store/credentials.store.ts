import type { Knex } from 'knex';
import type { DeviceIdentity } from '../device-types';
import type { PendingPassword } from '../credential-rotation-rules';
import type { Db } from '../../db/db';
import { preparedRaw } from '../../db/prepared';

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
  /** The new password of a planned rotation that is still open (credential-rotation-rules.ts). */
  pending: PendingPassword | null;
  /** Some rotation of the device (password or certificate) is open: the broker offers it on connect. */
  rotationOpen: boolean;
}

/** Whether the device `d` has an open credential rotation (the partial index of open rotations answers it). */
const ROTATION_OPEN =
  'EXISTS (SELECT 1 FROM device_credential_rotations o WHERE o.device_id = d.id AND o.completed_at IS NULL) AS rotation_open';

/**
 * The claimed devices among these serials with their password hashes, and the pending password
 * of an open planned rotation (one statement for a batch of lookups). Prepared (one plan per
 * pool connection): the broker runs it for every batch of connecting devices, and as a query
 * built by knex each batch paid for compiling the query in Node and for planning a three-table
 * join in PostgreSQL (bench/connection-capacity.bench.ts).
 */
export async function selectCredentialsBySerials(db: Db, input: { serials: string[] }): Promise<StoredCredential[]> {
  const { rows } = await preparedRaw<{ rows: CredentialRow[] }>(
    db,
    `SELECT d.id, d.account_id, d.serial, d.desired_config_version, d.desired_config, c.secret_hash,
            r.id AS pending_id, r.secret_hash AS pending_hash, r.grace_ends_at AS pending_grace_ends_at, ${ROTATION_OPEN}
       FROM devices d
       JOIN device_credentials c ON c.device_id = d.id
       LEFT JOIN device_credential_rotations r ON r.device_id = d.id AND r.kind = 'password' AND r.completed_at IS NULL
      WHERE d.serial = ANY(?::text[])`,
    [input.serials],
  );
  return rows.map((r) => ({
    device: toDeviceIdentity(r),
    secretHash: r.secret_hash,
    pending:
      r.pending_id !== null && r.pending_hash !== null && r.pending_grace_ends_at !== null
        ? { rotationId: r.pending_id, secretHash: r.pending_hash, graceEndsAt: new Date(r.pending_grace_ends_at) }
        : null,
    rotationOpen: r.rotation_open,
  }));
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
  pending_id: string | null;
  pending_hash: string | null;
  pending_grace_ends_at: Date | string | null;
  rotation_open: boolean;
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
  rotation_open: boolean | null;
}

/** A certificate this service issued, and the device it belongs to (null once unclaimed). */
export interface StoredCertificateCredential {
  fingerprintSha256: string;
  revokedAt: Date | null;
  device: DeviceIdentity | null;
  /** The device has an open credential rotation (a renewed certificate waiting for it, say). */
  rotationOpen: boolean;
}

/** The issued certificates among these fingerprints, each with its device if still claimed under the same serial. */
export async function selectCertificateCredentials(
  db: Db,
  input: { fingerprints: string[] },
): Promise<StoredCertificateCredential[]> {
  // The device is matched by id and serial: a certificate never follows its serial to a later
  // claim. Prepared, like selectCredentialsBySerials: it runs for every batch of connecting devices.
  const { rows } = await preparedRaw<{ rows: CertificateCredentialRow[] }>(
    db,
    `SELECT c.fingerprint_sha256, c.revoked_at, d.id, d.account_id, d.serial, d.desired_config_version, d.desired_config,
            ${ROTATION_OPEN}
       FROM device_certificates c
       LEFT JOIN devices d ON d.id = c.device_id AND d.serial = c.serial
      WHERE c.fingerprint_sha256 = ANY(?::text[])`,
    [input.fingerprints],
  );
  return rows.map((r) => ({
    fingerprintSha256: r.fingerprint_sha256,
    revokedAt: r.revoked_at,
    rotationOpen: r.rotation_open === true,
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
