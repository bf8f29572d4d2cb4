// Re-sends of a `sent` command (same job id, devices treat it as the same job): to a device heard
// from since it (re)connected, whose first publish may have raced its subscription or been lost
// with a process, and by the sweep when nobody answered (a lost publish, a crash between the
// commit and the publish).
import type { ServiceDeps } from '../service-deps';
import { isValidVersion, versionKey } from '../shared/version';
import type { Candidate } from './dispatch-page';
import type { CommandRow } from './ota-command-publisher';

type ResendDeps = Pick<ServiceDeps, 'knex' | 'clock'>;

/**
 * `sent` commands unanswered for `resendAfterMs` whose device is online now, connected to the
 * process `nodeId` when given (at most 5,000 a sweep; each process re-sends to its own devices).
 */
export async function staleSentCommands(deps: ResendDeps, resendAfterMs: number, nodeId?: string): Promise<Candidate[]> {
  const before = new Date(deps.clock.now().getTime() - resendAfterMs);
  return (await deps.knex.raw(
    `SELECT u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version, u.firmware_version_id, f.sha256, f.size, f.storage_key, f.signature, f.signing_key_id
       FROM device_updates u JOIN devices d ON d.id = u.device_id JOIN firmware_versions f ON f.id = u.firmware_version_id
      WHERE u.state = 'sent' AND u.sent_at < ? AND d.connectivity = 'online'${nodeId === undefined ? '' : ' AND d.broker_node = ?'} LIMIT 5000`,
    [before, ...(nodeId === undefined ? [] : [nodeId])],
  )).rows as Candidate[];
}

/**
 * The `sent` commands of devices heard from since they (re)connected, except those whose target
 * the device's heartbeat already shows (that heartbeat completes the update).
 */
export async function unansweredCommands(deps: ResendDeps, devices: Array<{ accountId: string; deviceId: string; firmware: string }>): Promise<Array<CommandRow & { account_id: string }>> {
  const accountOf = new Map(devices.map((d) => [d.deviceId, d.accountId]));
  const runs = new Map(devices.filter((d) => isValidVersion(d.firmware)).map((d) => [d.deviceId, versionKey(d.firmware)]));
  const rows = (await deps.knex.raw(
    `SELECT u.id, u.account_id, u.device_id, d.serial, u.target_version, u.firmware_version_id, f.sha256, f.size, f.storage_key, f.signature, f.signing_key_id
       FROM device_updates u JOIN devices d ON d.id = u.device_id JOIN firmware_versions f ON f.id = u.firmware_version_id
      WHERE u.device_id = ANY(?::uuid[]) AND u.state = 'sent'`,
    [[...accountOf.keys()]],
  )).rows as Array<CommandRow & { account_id: string }>;
  return rows.filter((r) => accountOf.get(r.device_id) === r.account_id && runs.get(r.device_id) !== versionKey(r.target_version));
}

/**
 * Counts a re-send on the rows that are still `sent` at this moment and returns only those: a
 * report that moved a row on since it was read (the device answered meanwhile) must not get
 * its finished job sent again (test/faults/process-kill.test.ts).
 */
export async function keepStillSent<T extends { id: string }>(deps: ResendDeps, rows: T[]): Promise<T[]> {
  if (rows.length === 0) return rows;
  const result = await deps.knex.raw(
    `UPDATE device_updates SET sent_at = ?, attempts = attempts + 1 WHERE id = ANY(?::uuid[]) AND state = 'sent' RETURNING id`,
    [deps.clock.now(), rows.map((r) => r.id)],
  );
  const still = new Set((result.rows as Array<{ id: string }>).map((r) => r.id));
  return rows.filter((r) => still.has(r.id));
}
