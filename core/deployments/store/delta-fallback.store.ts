import type { Knex } from 'knex';
import { sqlList } from '../../shared/sql-list';
import { IN_FLIGHT_STATES } from '../deployment-types';

/**
 * The fallback of a device that could not apply a delta (docs/ota.md "Delta images"): its update
 * goes back to `sent` with `delta_refused`, so its next command (sent at once) has the full image
 * only (`delta_id` keeps the delta it tried: its bytes were sent too). Only an in-flight update of that device and account that has not fallen back already:
 * a second `delta_apply` report of the same update is an ordinary failure (no loop).
 */
export async function fallBackToFullImage(
  trx: Knex.Transaction,
  input: { reports: Array<{ id: string; deviceId: string; accountId: string }>; now: Date; deadline: Date },
): Promise<string[]> {
  if (input.reports.length === 0) return [];
  const { rows } = await trx.raw<{ rows: Array<{ id: string }> }>(
    `UPDATE device_updates u
        SET delta_refused = true, state = 'sent', progress = 0, sent_at = ?, state_changed_at = ?,
            deadline_at = ?, attempts = u.attempts + 1
       FROM unnest(?::uuid[], ?::uuid[], ?::uuid[]) AS v(id, device_id, account_id)
      WHERE u.id = v.id AND u.device_id = v.device_id AND u.account_id = v.account_id
        AND u.state IN (${sqlList(IN_FLIGHT_STATES)}) AND NOT u.delta_refused
      RETURNING u.id`,
    [
      input.now,
      input.now,
      input.deadline,
      input.reports.map((r) => r.id),
      input.reports.map((r) => r.deviceId),
      input.reports.map((r) => r.accountId),
    ],
  );
  return rows.map((r) => r.id);
}

/** Of these updates, those that fell back already: a late or repeated `delta_apply` report of theirs is stale. */
export async function fellBackAlready(trx: Knex.Transaction, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await trx.raw<{ rows: Array<{ id: string }> }>(
    'SELECT id FROM device_updates WHERE id = ANY(?::uuid[]) AND delta_refused',
    [ids],
  );
  return rows.map((r) => r.id);
}
