import type { Knex } from 'knex';
import type { Clock } from '../shared/clock';
import { appendEvents } from '../events/outbox';
import type { NewEvent } from '../events/event-types';
import type { UpdateRef, UpdateState } from './deployment-types';
import type { StepWrite } from './report-rules';
import type { OtaErrorCode } from '#protocol/payloads';
import { finishUpdateRows, markUpdatesSent, writeSteps } from './store/device-updates.store';
import { continuePaths } from './upgrade-paths';

// The per-device state machine's transitions: the rows (device-updates.store.ts, set-based so
// that thousands of devices cost a few statements) and their outbox events, in the caller's
// transaction.

export type { UpdateRef } from './deployment-types';
export type { StepWrite } from './report-rules';

/**
 * queued -> sent (first publish), each with the broker connection it goes out on when known here.
 * Devices show `updating` while connected.
 */
export async function markSent(
  trx: Knex.Transaction,
  clock: Clock,
  rows: Array<UpdateRef & { connection?: string | null }>,
  deadline: Date,
): Promise<void> {
  if (rows.length === 0) return;
  await markUpdatesSent(trx, { updates: rows, now: clock.now(), deadline });
  await appendEvents(
    trx,
    clock,
    rows.map((r) => progressEvent(r, 'sent', 0)),
  );
}

/** Moves updates to a final state (only those still unfinished); returns the ones it moved. */
export async function finishUpdates(
  trx: Knex.Transaction,
  clock: Clock,
  input: {
    ids: string[];
    state: Extract<UpdateState, 'succeeded' | 'failed' | 'timed_out' | 'rolled_back' | 'cancelled'>;
    error?: string | null;
    /** The device's reason from the protocol's vocabulary (a failed or rolled-back report). */
    errorCode?: OtaErrorCode | null;
    detail?: Record<string, unknown>;
  },
): Promise<UpdateRef[]> {
  if (input.ids.length === 0) return [];
  const errorCode = input.errorCode ?? null;
  const rows = await finishUpdateRows(trx, {
    ids: input.ids,
    state: input.state,
    error: input.error ?? null,
    errorCode,
    now: clock.now(),
    history: {
      state: input.state,
      ...(input.error ? { error: input.error } : {}),
      ...(errorCode ? { error_code: errorCode } : {}),
      ...(input.detail ?? {}),
    },
  });
  if (rows.length === 0) return rows;
  // A hop of an upgrade path that is not the last queues the next (upgrade-paths.ts).
  const passed =
    input.state === 'succeeded'
      ? await continuePaths(
          trx,
          clock,
          rows.map((r) => r.id),
        )
      : new Set<string>();
  const events: NewEvent[] = [];
  for (const r of rows) {
    if (input.state === 'cancelled') continue;
    if (passed.has(r.id)) {
      r.nextHopQueued = true;
      // Not the update's completion: the device reached a stepping stone.
      events.push(progressEvent(r, 'hop_succeeded', 100));
      continue;
    }
    const base = {
      serial: r.serial,
      device_id: r.deviceId,
      job_id: r.id,
      deployment_id: r.deploymentId,
      version: r.targetVersion,
      from_version: r.fromVersion,
      state: input.state,
      ...(input.detail ?? {}),
    };
    events.push(
      input.state === 'succeeded'
        ? { accountId: r.accountId, type: 'firmware.update.completed', subject: r.serial, data: base }
        : {
            accountId: r.accountId,
            type: 'firmware.update.failed',
            subject: r.serial,
            data: { ...base, error: input.error ?? input.state, error_code: errorCode },
          },
    );
  }
  await appendEvents(trx, clock, events);
  return rows;
}

function progressEvent(r: UpdateRef, state: string, progress: number | null): NewEvent {
  return {
    accountId: r.accountId,
    type: 'firmware.update.progress',
    subject: r.serial,
    data: {
      serial: r.serial,
      device_id: r.deviceId,
      job_id: r.id,
      deployment_id: r.deploymentId,
      version: r.targetVersion,
      state,
      progress,
    },
  };
}

/** Several reported steps at once (one statement per table). */
export async function applySteps(trx: Knex.Transaction, clock: Clock, writes: StepWrite[]): Promise<void> {
  if (writes.length === 0) return;
  const steps = writes.flatMap((w) => w.transitions.map((state) => ({ w, state })));
  await writeSteps(trx, {
    now: clock.now(),
    writes: writes.map((w) => ({
      id: w.row.id,
      state: w.state,
      progress: w.progress,
      changed: w.transitions.length > 0,
      reportedSuccess: w.reportedSuccess,
      deadline: w.deadline,
    })),
    history: steps.map((s) => ({
      id: s.w.row.id,
      state: s.state,
      awaitingBoot: s.w.reportedSuccess && s.state === 'rebooting',
    })),
  });
  if (steps.length === 0) return;
  await appendEvents(
    trx,
    clock,
    steps.map((s) => progressEvent(s.w.row, s.state, s.w.progress)),
  );
}
