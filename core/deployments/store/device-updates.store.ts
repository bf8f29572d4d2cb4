import type { Knex } from 'knex';
import { sqlList } from '../../shared/sql-list';
import { ACTIVE_STATES, IN_FLIGHT_STATES, type UpdateRef, type UpdateState } from '../deployment-types';
import type { ActiveUpdate, ReportedUpdate } from '../report-rules';
import type { Db } from '../../db/db';
import { preparedRaw } from '../../db/prepared';

/**
 * The per-device update rows: the state machine's writes, set-based so that thousands of devices
 * cost a few statements, and the reads that lock rows before a decision. Writes that change an
 * update also keep devices.current_update_id / status and the device history in step.
 */

interface UpdateRefRow {
  id: string;
  account_id: string;
  device_id: string;
  deployment_id: string;
  serial: string;
  target_version: string;
  from_version: string | null;
}

const toUpdateRef = (r: UpdateRefRow): UpdateRef => ({
  id: r.id,
  accountId: r.account_id,
  deviceId: r.device_id,
  deploymentId: r.deployment_id,
  serial: r.serial,
  targetVersion: r.target_version,
  fromVersion: r.from_version,
});

/**
 * queued -> sent (first publish). Devices show `updating` while connected. The history rows are
 * written from the UPDATE's own RETURNING and the devices from the ids at hand: reading the
 * updates back by id for each cost 10-15 ms per 1,000 commands (bench/ota.bench.ts).
 *
 * Prepared (generic plans): planned with the page's actual arrays, a page of 4,000 ids among
 * 120,000 devices was a sequential scan of every device, hashed, for each of these statements
 * (140-180 ms); the generic plan probes the primary keys (45-50 ms, EXPLAIN ANALYZE here).
 */
export async function markUpdatesSent(
  trx: Knex.Transaction,
  input: {
    /** `connection`: the broker connection the command goes out on (null when not known here). */
    updates: Array<Pick<UpdateRef, 'id' | 'deviceId'> & { connection?: string | null }>;
    now: Date;
    deadline: Date;
  },
): Promise<void> {
  const { updates, now, deadline } = input;
  if (updates.length === 0) return;
  await preparedRaw(
    trx,
    `WITH sent AS (
       UPDATE device_updates u SET state = 'sent', sent_at = ?, attempts = u.attempts + 1, state_changed_at = ?, deadline_at = ?,
              sent_connection = v.connection
         FROM unnest(?::uuid[], ?::text[]) AS v(id, connection)
        WHERE u.id = v.id AND u.state = 'queued'
       RETURNING u.id, u.account_id, u.device_id, u.deployment_id, u.target_version, u.attempts
     )
     INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT account_id, device_id, 'update_step',
            jsonb_build_object('job_id', id, 'deployment_id', deployment_id, 'target_version', target_version, 'attempts', attempts, 'state', 'sent'), ?
       FROM sent`,
    // knex's RawBinding typing does not admit arrays of nullable values; pg serializes them.
    [
      now,
      now,
      deadline,
      updates.map((r) => r.id),
      updates.map((r) => r.connection ?? null) as unknown as string[],
      now,
    ],
  );
  await lockDevices(
    trx,
    updates.map((r) => r.deviceId),
  );
  await preparedRaw(
    trx,
    `UPDATE devices d SET current_update_id = v.update_id, status = CASE WHEN d.connectivity = 'online' THEN 'updating' ELSE d.status END, updated_at = ?
       FROM unnest(?::uuid[], ?::uuid[]) AS v(device_id, update_id) WHERE d.id = v.device_id`,
    [now, updates.map((r) => r.deviceId), updates.map((r) => r.id)],
  );
}

/**
 * Moves updates to a final state (only those still unfinished) with a history row carrying
 * `history`; returns the ones it moved.
 */
export async function finishUpdateRows(
  trx: Knex.Transaction,
  input: {
    ids: string[];
    state: Extract<UpdateState, 'succeeded' | 'failed' | 'timed_out' | 'rolled_back' | 'cancelled'>;
    error: string | null;
    /** The device's reason from the protocol's vocabulary; null when it gave none (or for other states). */
    errorCode?: string | null;
    now: Date;
    history: Record<string, unknown>;
  },
): Promise<UpdateRef[]> {
  if (input.ids.length === 0) return [];
  const { now } = input;
  const result = await trx.raw<{ rows: UpdateRefRow[] }>(
    `UPDATE device_updates u SET state = ?, error = ?, error_code = ?, finished_at = ?, state_changed_at = ?, deadline_at = NULL,
            progress = CASE WHEN ? = 'succeeded' THEN 100 ELSE u.progress END
       FROM devices d
      WHERE u.id = ANY(?::uuid[]) AND u.state IN (${sqlList(ACTIVE_STATES)}) AND d.id = u.device_id
      RETURNING u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version`,
    [input.state, input.error, input.errorCode ?? null, now, now, input.state, input.ids],
  );
  const rows = result.rows;
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  await lockDevices(
    trx,
    rows.map((r) => r.device_id),
  );
  // By primary key: `current_update_id` has no index, and matching on it alone read every
  // device row of the table for each batch of finished updates (a sequential scan per heartbeat
  // flush while 10,000 devices came back from their reboot).
  await trx.raw(
    `UPDATE devices d SET current_update_id = NULL, status = CASE WHEN d.connectivity = 'online' THEN 'online' ELSE 'offline' END, updated_at = ?
       FROM unnest(?::uuid[], ?::uuid[]) AS v(device_id, update_id)
      WHERE d.id = v.device_id AND d.current_update_id = v.update_id`,
    [now, rows.map((r) => r.device_id), ids],
  );
  await history(trx, now, ids, input.history);
  return rows.map(toUpdateRef);
}

async function history(trx: Knex.Transaction, now: Date, ids: string[], data: Record<string, unknown>): Promise<void> {
  await trx.raw(
    `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT account_id, device_id, 'update_step',
            jsonb_build_object('job_id', id, 'deployment_id', deployment_id, 'target_version', target_version, 'attempts', attempts) || ?::jsonb, ?
       FROM device_updates WHERE id = ANY(?::uuid[])`,
    [JSON.stringify(data), now, ids],
  );
}

/** One update's new step: state, progress (null keeps it), deadline. */
export interface StepRowWrite {
  id: string;
  state: 'downloading' | 'installing' | 'rebooting';
  progress: number | null;
  /** The state changed (state_changed_at moves). */
  changed: boolean;
  /** The device said `succeeded`: it now has to come back on the target version. */
  reportedSuccess: boolean;
  deadline: Date;
}

/** A history row for a step an update passed through. */
export interface StepHistory {
  id: string;
  state: string;
  /** The step is the `rebooting` that a reported success leads to (its history says what it waits for). */
  awaitingBoot: boolean;
}

/** Several reported steps at once (one statement per table). */
export async function writeSteps(
  trx: Knex.Transaction,
  input: { now: Date; writes: StepRowWrite[]; history: StepHistory[] },
): Promise<void> {
  const { now, writes, history: steps } = input;
  if (writes.length === 0) return;
  await trx.raw(
    `UPDATE device_updates u
        SET state = v.state,
            progress = COALESCE(v.progress, u.progress),
            state_changed_at = CASE WHEN v.changed THEN ?::timestamptz ELSE u.state_changed_at END,
            reported_success_at = CASE WHEN v.rs THEN ?::timestamptz ELSE u.reported_success_at END,
            deadline_at = v.deadline
       FROM unnest(?::uuid[], ?::text[], ?::int[], ?::boolean[], ?::boolean[], ?::timestamptz[]) AS v(id, state, progress, changed, rs, deadline)
      WHERE u.id = v.id`,
    [
      now,
      now,
      writes.map((w) => w.id),
      writes.map((w) => w.state),
      // Knex's binding types have no nullable int[]; PostgreSQL takes the array as is.
      writes.map((w) => w.progress) as unknown as number[],
      writes.map((w) => w.changed),
      writes.map((w) => w.reportedSuccess),
      writes.map((w) => w.deadline),
    ],
  );
  if (steps.length === 0) return;
  await trx.raw(
    `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT u.account_id, u.device_id, 'update_step',
            jsonb_build_object('job_id', u.id, 'deployment_id', u.deployment_id, 'target_version', u.target_version, 'state', s.state)
              || CASE WHEN s.rs THEN '{"reported":"succeeded","awaiting":"boot confirmation (heartbeat with the target version)"}'::jsonb ELSE '{}'::jsonb END, ?
       FROM unnest(?::uuid[], ?::text[], ?::boolean[]) WITH ORDINALITY AS s(id, state, rs, ord)
       JOIN device_updates u ON u.id = s.id ORDER BY s.ord`,
    [now, steps.map((s) => s.id), steps.map((s) => s.state), steps.map((s) => s.awaitingBoot)],
  );
}

/** Device rows locked in id order: the engine's transactions never wait on each other in a cycle. */
async function lockDevices(trx: Knex.Transaction, deviceIds: string[]): Promise<void> {
  await preparedRaw(trx, 'SELECT id FROM devices WHERE id = ANY(?::uuid[]) ORDER BY id FOR UPDATE', [deviceIds]);
}

/**
 * In-flight updates past their deadline, at most `limit`, locked (SKIP LOCKED: another process
 * may be on them); oldest deadline first.
 */
export async function lockOverdueUpdates(
  trx: Knex.Transaction,
  input: { now: Date; limit: number },
): Promise<string[]> {
  const rows = (
    await trx.raw<{ rows: Array<{ id: string; reported_success_at: Date | null }> }>(
      `SELECT id, reported_success_at FROM device_updates WHERE state IN (${sqlList(IN_FLIGHT_STATES)}) AND deadline_at < ? ORDER BY deadline_at LIMIT ${Math.floor(input.limit)} FOR UPDATE SKIP LOCKED`,
      [input.now],
    )
  ).rows;
  return rows.map((r) => r.id);
}

interface ActiveUpdateRow {
  id: string;
  device_id: string;
  account_id: string;
  deployment_id: string;
  state: UpdateState;
  target_version: string;
}

/** The unfinished updates of these devices, locked in id order. */
export async function lockActiveUpdatesOfDevices(trx: Knex.Transaction, deviceIds: string[]): Promise<ActiveUpdate[]> {
  const rows = (
    await trx.raw<{ rows: ActiveUpdateRow[] }>(
      `SELECT u.id, u.device_id, u.account_id, u.deployment_id, u.state, u.target_version FROM device_updates u
      WHERE u.device_id = ANY(?::uuid[]) AND u.state IN (${sqlList(ACTIVE_STATES)}) ORDER BY u.id FOR UPDATE OF u`,
      [deviceIds],
    )
  ).rows;
  return rows.map((r) => ({
    id: r.id,
    deviceId: r.device_id,
    accountId: r.account_id,
    deploymentId: r.deployment_id,
    state: r.state,
    targetVersion: r.target_version,
  }));
}

/** The updates these reports name (unknown ids are left out), locked in id order. */
export async function lockReportedUpdates(trx: Knex.Transaction, jobIds: string[]): Promise<ReportedUpdate[]> {
  const rows = (
    await trx.raw<{ rows: Array<UpdateRefRow & { state: UpdateState; firmware_key: string | null }> }>(
      `SELECT u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version, u.state,
              CASE WHEN d.firmware IS NULL THEN NULL ELSE d.firmware_key END AS firmware_key
         FROM device_updates u JOIN devices d ON d.id = u.device_id
        WHERE u.id = ANY(?::uuid[]) ORDER BY u.id FOR UPDATE OF u`,
      [jobIds],
    )
  ).rows;
  return rows.map((r) => ({ ...toUpdateRef(r), state: r.state, firmwareKey: r.firmware_key }));
}

/**
 * The queued updates of these devices (any account: the caller checks). Prepared: it runs for
 * every batch of devices that subscribe (bench/connection-capacity.bench.ts).
 */
export async function queuedUpdatesOfDevices(
  db: Db,
  deviceIds: string[],
): Promise<Array<{ deviceId: string; accountId: string; deploymentId: string }>> {
  const rows = (
    await preparedRaw<{ rows: Array<{ device_id: string; account_id: string; deployment_id: string }> }>(
      db,
      `SELECT u.device_id, u.account_id, u.deployment_id FROM device_updates u WHERE u.device_id = ANY(?::uuid[]) AND u.state = 'queued'`,
      [deviceIds],
    )
  ).rows;
  return rows.map((r) => ({ deviceId: r.device_id, accountId: r.account_id, deploymentId: r.deployment_id }));
}

/** Cancels the deployment's queued updates (devices stay where they are), with their history; returns how many. */
export async function cancelQueuedOfDeployment(
  trx: Knex.Transaction,
  input: { deploymentId: string; now: Date },
): Promise<number> {
  const { now } = input;
  const cancelled = await trx.raw<{ rows: Array<{ id: string }> }>(
    `UPDATE device_updates SET state = 'cancelled', error = 'deployment cancelled', finished_at = ?, state_changed_at = ?, deadline_at = NULL
          WHERE deployment_id = ? AND state = 'queued' RETURNING id`,
    [now, now, input.deploymentId],
  );
  const ids = cancelled.rows.map((r) => r.id);
  if (ids.length > 0) {
    await trx.raw(
      `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
           SELECT account_id, device_id, 'update_step', jsonb_build_object('state', 'cancelled', 'job_id', id, 'deployment_id', deployment_id, 'target_version', target_version, 'reason', 'deployment cancelled'), ?
             FROM device_updates WHERE id = ANY(?::uuid[])`,
      [now, ids],
    );
  }
  return ids.length;
}
