// Re-sends of a `sent` command (same job id, devices treat it as the same job): to a device heard
// from since it (re)connected, whose first publish may have raced its subscription or been lost
// with a process, and by the sweep when nobody answered (a lost publish, a crash between the
// commit and the publish).
import type { ServiceDeps } from '../service-deps';
import { isValidVersion, versionKey } from '../shared/version';
import type { CommandJob } from './ota-command-publisher';
import {
  markResent,
  sentCommandsOfDevices,
  staleSentCommands as readStaleSentCommands,
  type SentCommand,
} from './store/dispatch.store';

type ResendDeps = Pick<ServiceDeps, 'knex' | 'clock'>;

/**
 * `sent` commands unanswered for `resendAfterMs` whose device is online now, connected to the
 * process `nodeId` when given (at most 5,000 a sweep; each process re-sends to its own devices).
 */
export async function staleSentCommands(
  deps: ResendDeps,
  resendAfterMs: number,
  nodeId?: string,
): Promise<SentCommand[]> {
  return readStaleSentCommands(deps.knex, { before: new Date(deps.clock.now().getTime() - resendAfterMs), nodeId });
}

/**
 * The `sent` commands of devices heard from since they (re)connected, except those whose target
 * the device's heartbeat already shows (that heartbeat completes the update).
 */
export async function unansweredCommands(
  deps: ResendDeps,
  devices: ReadonlyArray<{ accountId: string; deviceId: string; firmware: string }>,
): Promise<Array<CommandJob & { accountId: string }>> {
  const accountOf = new Map(devices.map((d) => [d.deviceId, d.accountId]));
  const runs = new Map(
    devices.filter((d) => isValidVersion(d.firmware)).map((d) => [d.deviceId, versionKey(d.firmware)]),
  );
  const rows = await sentCommandsOfDevices(deps.knex, [...accountOf.keys()]);
  return rows.filter(
    (r) => accountOf.get(r.deviceId) === r.accountId && runs.get(r.deviceId) !== versionKey(r.targetVersion),
  );
}

/**
 * Counts a re-send on the rows that are still `sent` at this moment and returns only those: a
 * report that moved a row on since it was read (the device answered meanwhile) must not get
 * its finished job sent again (test/faults/process-kill.test.ts). Each row records the
 * connection it goes out on (`connectionOf`); with `unlessSentOn`, a row already sent on that
 * connection is left out: the re-send to a device that came back followed the dispatch of its
 * queued update on the same connection, and a device coming online got its command twice within
 * milliseconds (test/ota/ota-command-once.test.ts). The conditional UPDATE decides it whichever
 * of the two commits first.
 */
export async function keepStillSent<T extends { id: string; serial: string }>(
  deps: ResendDeps,
  rows: T[],
  options: { connectionOf: (row: T) => string | undefined; unlessSentOn: boolean },
): Promise<T[]> {
  if (rows.length === 0) return rows;
  const still = await markResent(deps.knex, {
    resends: rows.map((r) => ({ id: r.id, connection: options.connectionOf(r) ?? null })),
    now: deps.clock.now(),
    unlessSentOn: options.unlessSentOn,
  });
  return rows.filter((r) => still.has(r.id));
}
