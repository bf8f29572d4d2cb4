import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import { appendEvents } from '../../events/outbox';
import type { NewEvent } from '../../events/event-types';
import { ACTIVE_SQL } from './deployment-targets';
import type { UpdateState } from './deployment-types';

/**
 * The writes of the per-device state machine, set-based so that thousands of devices cost a few
 * statements. Each keeps devices.current_update_id / status, device history and the outbox in
 * the caller's transaction.
 */
export interface UpdateRef {
  id: string;
  account_id: string;
  device_id: string;
  deployment_id: string;
  serial: string;
  target_version: string;
  from_version: string | null;
}

/**
 * queued -> sent (first publish). Devices show `updating` while connected. The history rows are
 * written from the UPDATE's own RETURNING and the devices from the ids at hand: reading the
 * updates back by id for each cost 10-15 ms per 1,000 commands (bench/ota.bench.ts).
 */
export async function markSent(trx: Knex.Transaction, clock: Clock, rows: UpdateRef[], deadline: Date): Promise<void> {
  if (rows.length === 0) return;
  const now = clock.now();
  await trx.raw(
    `WITH sent AS (
       UPDATE device_updates SET state = 'sent', sent_at = ?, attempts = attempts + 1, state_changed_at = ?, deadline_at = ?
        WHERE id = ANY(?::uuid[]) AND state = 'queued'
       RETURNING id, account_id, device_id, deployment_id, target_version, attempts
     )
     INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT account_id, device_id, 'update_step',
            jsonb_build_object('job_id', id, 'deployment_id', deployment_id, 'target_version', target_version, 'attempts', attempts, 'state', 'sent'), ?
       FROM sent`,
    [now, now, deadline, rows.map((r) => r.id), now],
  );
  await lockDevices(trx, rows.map((r) => r.device_id));
  await trx.raw(
    `UPDATE devices d SET current_update_id = v.update_id, status = CASE WHEN d.connectivity = 'online' THEN 'updating' ELSE d.status END, updated_at = ?
       FROM unnest(?::uuid[], ?::uuid[]) AS v(device_id, update_id) WHERE d.id = v.device_id`,
    [now, rows.map((r) => r.device_id), rows.map((r) => r.id)],
  );
  await appendEvents(trx, clock, rows.map((r) => progressEvent(r, 'sent', 0)));
}

/** Moves updates to a final state (only those still unfinished); returns the ones it moved. */
export async function finishUpdates(
  trx: Knex.Transaction,
  clock: Clock,
  input: { ids: string[]; state: Extract<UpdateState, 'succeeded' | 'failed' | 'timed_out' | 'rolled_back' | 'cancelled'>; error?: string | null; detail?: Record<string, unknown> },
): Promise<UpdateRef[]> {
  if (input.ids.length === 0) return [];
  const now = clock.now();
  const result = await trx.raw(
    `UPDATE device_updates u SET state = ?, error = ?, finished_at = ?, state_changed_at = ?, deadline_at = NULL,
            progress = CASE WHEN ? = 'succeeded' THEN 100 ELSE u.progress END
       FROM devices d
      WHERE u.id = ANY(?::uuid[]) AND u.state IN (${ACTIVE_SQL}) AND d.id = u.device_id
      RETURNING u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version`,
    [input.state, input.error ?? null, now, now, input.state, input.ids],
  );
  const rows = result.rows as UpdateRef[];
  if (rows.length === 0) return rows;
  const ids = rows.map((r) => r.id);
  await lockDevices(trx, rows.map((r) => r.device_id));
  // By primary key: `current_update_id` has no index, and matching on it alone read every
  // device row of the table for each batch of finished updates (a sequential scan per heartbeat
  // flush while 10,000 devices came back from their reboot).
  await trx.raw(
    `UPDATE devices d SET current_update_id = NULL, status = CASE WHEN d.connectivity = 'online' THEN 'online' ELSE 'offline' END, updated_at = ?
       FROM unnest(?::uuid[], ?::uuid[]) AS v(device_id, update_id)
      WHERE d.id = v.device_id AND d.current_update_id = v.update_id`,
    [now, rows.map((r) => r.device_id), ids],
  );
  await history(trx, now, ids, { state: input.state, ...(input.error ? { error: input.error } : {}), ...(input.detail ?? {}) });
  const events: NewEvent[] = [];
  for (const r of rows) {
    if (input.state === 'cancelled') continue;
    const base = { serial: r.serial, device_id: r.device_id, job_id: r.id, deployment_id: r.deployment_id, version: r.target_version, from_version: r.from_version, state: input.state, ...(input.detail ?? {}) };
    events.push(
      input.state === 'succeeded'
        ? { accountId: r.account_id, type: 'firmware.update.completed', subject: r.serial, data: base }
        : { accountId: r.account_id, type: 'firmware.update.failed', subject: r.serial, data: { ...base, error: input.error ?? input.state } },
    );
  }
  await appendEvents(trx, clock, events);
  return rows;
}

function progressEvent(r: UpdateRef, state: string, progress: number | null): NewEvent {
  return {
    accountId: r.account_id,
    type: 'firmware.update.progress',
    subject: r.serial,
    data: { serial: r.serial, device_id: r.device_id, job_id: r.id, deployment_id: r.deployment_id, version: r.target_version, state, progress },
  };
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

export interface StepWrite {
  row: UpdateRef;
  state: 'downloading' | 'installing' | 'rebooting';
  progress: number | null;
  /** The states the update passed through in this batch (each gets a history row and event). */
  transitions: string[];
  reportedSuccess: boolean;
  deadline: Date;
}

/** Several reported steps at once (one statement per table). */
export async function applySteps(trx: Knex.Transaction, clock: Clock, writes: StepWrite[]): Promise<void> {
  if (writes.length === 0) return;
  const now = clock.now();
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
      writes.map((w) => w.row.id),
      writes.map((w) => w.state),
      // Knex's binding types have no nullable int[]; PostgreSQL takes the array as is.
      writes.map((w) => w.progress) as unknown as number[],
      writes.map((w) => w.transitions.length > 0),
      writes.map((w) => w.reportedSuccess),
      writes.map((w) => w.deadline),
    ],
  );
  const steps = writes.flatMap((w) => w.transitions.map((state) => ({ w, state })));
  if (steps.length === 0) return;
  await trx.raw(
    `INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
     SELECT u.account_id, u.device_id, 'update_step',
            jsonb_build_object('job_id', u.id, 'deployment_id', u.deployment_id, 'target_version', u.target_version, 'state', s.state)
              || CASE WHEN s.rs THEN '{"reported":"succeeded","awaiting":"boot confirmation (heartbeat with the target version)"}'::jsonb ELSE '{}'::jsonb END, ?
       FROM unnest(?::uuid[], ?::text[], ?::boolean[]) WITH ORDINALITY AS s(id, state, rs, ord)
       JOIN device_updates u ON u.id = s.id ORDER BY s.ord`,
    [now, steps.map((s) => s.w.row.id), steps.map((s) => s.state), steps.map((s) => s.w.reportedSuccess && s.state === 'rebooting')],
  );
  await appendEvents(trx, clock, steps.map((s) => progressEvent(s.w.row, s.state, s.w.progress)));
}

/** Device rows locked in id order: the engine's transactions never wait on each other in a cycle. */
async function lockDevices(trx: Knex.Transaction, deviceIds: string[]): Promise<void> {
  await trx.raw('SELECT id FROM devices WHERE id = ANY(?::uuid[]) ORDER BY id FOR UPDATE', [deviceIds]);
}
