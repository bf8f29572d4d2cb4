// Re-sends of a `sent` command (same job id, devices treat it as the same job): to a device that
// (re)connected, whose first publish may have raced its subscription, and by the sweep when
// nobody answered (a lost publish, a crash between the commit and the publish).
import type { ServiceDeps } from '../service-deps';
import type { Candidate } from './dispatch-page';

type ResendDeps = Pick<ServiceDeps, 'knex' | 'clock'>;

/** `sent` commands unanswered for `resendAfterMs` whose device is online now (at most 5,000 a sweep). */
export async function staleSentCommands(deps: ResendDeps, resendAfterMs: number): Promise<Candidate[]> {
  const before = new Date(deps.clock.now().getTime() - resendAfterMs);
  return (await deps.knex.raw(
    `SELECT u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version, u.firmware_version_id, f.sha256, f.size, f.storage_key, f.signature, f.signing_key_id
       FROM device_updates u JOIN devices d ON d.id = u.device_id JOIN firmware_versions f ON f.id = u.firmware_version_id
      WHERE u.state = 'sent' AND u.sent_at < ? AND d.connectivity = 'online' LIMIT 5000`,
    [before],
  )).rows as Candidate[];
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
