import type { Knex } from 'knex';
import type { Db } from '../../db/db';
import type { RotationKind, RotationOutcome } from '../credential-rotation-rules';

/** Planned credential rotations (`device_credential_rotations`); see the migration 20261127040000. */

interface RotationRow {
  id: string;
  account_id: string;
  device_id: string;
  serial: string;
  kind: RotationKind;
  secret_hash: string | null;
  secret_sealed: string | null;
  fingerprint_sha256: string | null;
  requested_by: string;
  created_at: Date | string;
  grace_ends_at: Date | string;
  acknowledged_at: Date | string | null;
}

/** An open rotation (not completed) as the service reads it. */
export interface OpenRotation {
  id: string;
  accountId: string;
  deviceId: string;
  serial: string;
  kind: RotationKind;
  /** SHA-256 of the new password (password rotations). */
  secretHash: string | null;
  /** The new password sealed with the server secret, for re-delivery (password rotations). */
  secretSealed: string | null;
  /** The issued certificate (certificate rotations). */
  fingerprintSha256: string | null;
  requestedBy: string;
  createdAt: Date;
  graceEndsAt: Date;
  acknowledgedAt: Date | null;
}

const COLUMNS = [
  'r.id',
  'r.account_id',
  'r.device_id',
  'd.serial',
  'r.kind',
  'r.secret_hash',
  'r.secret_sealed',
  'r.fingerprint_sha256',
  'r.requested_by',
  'r.created_at',
  'r.grace_ends_at',
  'r.acknowledged_at',
];

function toRotation(row: RotationRow): OpenRotation {
  return {
    id: row.id,
    accountId: row.account_id,
    deviceId: row.device_id,
    serial: row.serial,
    kind: row.kind,
    secretHash: row.secret_hash,
    secretSealed: row.secret_sealed,
    fingerprintSha256: row.fingerprint_sha256,
    requestedBy: row.requested_by,
    createdAt: new Date(row.created_at),
    graceEndsAt: new Date(row.grace_ends_at),
    acknowledgedAt: row.acknowledged_at === null ? null : new Date(row.acknowledged_at),
  };
}

/** The open rotations of a device (joined to its row, so the serial comes along). */
function openOf(db: Db) {
  return db('device_credential_rotations as r').join('devices as d', 'd.id', 'r.device_id').whereNull('r.completed_at');
}

export async function insertRotation(
  trx: Knex.Transaction,
  input: {
    id: string;
    accountId: string;
    deviceId: string;
    kind: RotationKind;
    secretHash?: string;
    secretSealed?: string;
    fingerprintSha256?: string;
    requestedBy: string;
    now: Date;
    graceEndsAt: Date;
  },
): Promise<void> {
  await trx('device_credential_rotations').insert({
    id: input.id,
    account_id: input.accountId,
    device_id: input.deviceId,
    kind: input.kind,
    secret_hash: input.secretHash ?? null,
    secret_sealed: input.secretSealed ?? null,
    fingerprint_sha256: input.fingerprintSha256 ?? null,
    requested_by: input.requestedBy,
    created_at: input.now,
    grace_ends_at: input.graceEndsAt,
  });
}

/** The device's open rotations, oldest first; `lock` holds them until the transaction ends. */
export async function selectOpenRotations(
  db: Db,
  input: { deviceId: string; kind?: RotationKind; lock?: boolean },
): Promise<OpenRotation[]> {
  const query = openOf(db).where('r.device_id', input.deviceId);
  if (input.kind) query.where('r.kind', input.kind);
  if (input.lock) query.forUpdate('r');
  const rows: RotationRow[] = await query.orderBy('r.created_at').select(COLUMNS);
  return rows.map(toRotation);
}

/** Whether any open rotation's grace period is over (the sweep's check before it opens a transaction). */
export async function anyDueRotation(db: Db, input: { now: Date }): Promise<boolean> {
  const row: { id: string } | undefined = await db('device_credential_rotations')
    .whereNull('completed_at')
    .where('grace_ends_at', '<=', input.now)
    .first('id');
  return row !== undefined;
}

/**
 * Open rotations whose grace period is over, locked; rows another process holds are skipped
 * (it is finishing them).
 */
export async function lockDueRotations(
  trx: Knex.Transaction,
  input: { now: Date; limit: number },
): Promise<OpenRotation[]> {
  const rows: RotationRow[] = await openOf(trx)
    .where('r.grace_ends_at', '<=', input.now)
    .orderBy('r.grace_ends_at')
    .limit(input.limit)
    .forUpdate('r')
    .skipLocked()
    .select(COLUMNS);
  return rows.map(toRotation);
}

/** Ends a rotation: the sealed password is erased with it, whatever the outcome. */
export async function finishRotation(
  trx: Knex.Transaction,
  input: { rotationId: string; outcome: RotationOutcome; now: Date },
): Promise<void> {
  await trx('device_credential_rotations')
    .where({ id: input.rotationId })
    .whereNull('completed_at')
    .update({ completed_at: input.now, outcome: input.outcome, secret_sealed: null });
}

/** The device stored the delivery: a certificate is not delivered again. */
export async function markAcknowledged(trx: Knex.Transaction, input: { rotationId: string; now: Date }): Promise<void> {
  await trx('device_credential_rotations')
    .where({ id: input.rotationId })
    .update({ acknowledged_at: trx.raw('coalesce(acknowledged_at, ?)', [input.now]) });
}

/** How many rotations still hold a sealed password past their end (a check for tests and operators: always 0). */
export async function countSealedSecretsOfEnded(db: Db): Promise<number> {
  const row = (await db('device_credential_rotations')
    .whereNotNull('completed_at')
    .whereNotNull('secret_sealed')
    .count({ n: '*' })
    .first()) as { n: number | string } | undefined;
  return Number(row?.n ?? 0);
}
