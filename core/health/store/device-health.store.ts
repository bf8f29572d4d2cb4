import type { Knex } from 'knex';
import type { FailureMark, HealthReason, HealthState } from '../health-rules';

export interface HealthWrite {
  deviceId: string;
  accountId: string;
  state: HealthState;
  reasons: HealthReason[];
  urgency: number;
  failedMark: FailureMark | null;
}

/**
 * Stores the verdicts of one pass and answers the devices whose state changed (a first verdict
 * other than `ok` counts as a change from `ok`). One statement: the previous state is read in the
 * same snapshot the upsert writes.
 */
export async function saveVerdicts(
  db: Knex | Knex.Transaction,
  input: { rows: HealthWrite[]; now: Date },
): Promise<Array<{ deviceId: string; previous: HealthState; state: HealthState }>> {
  if (input.rows.length === 0) return [];
  const payload = JSON.stringify(
    input.rows.map((r) => ({
      device_id: r.deviceId,
      account_id: r.accountId,
      state: r.state,
      reasons: r.reasons,
      urgency: r.urgency,
      failed_mark: r.failedMark,
    })),
  );
  const result = await db.raw<{ rows: Array<{ device_id: string; previous: string | null; state: string }> }>(
    `WITH incoming AS (
       SELECT * FROM jsonb_to_recordset(?::jsonb) AS x(device_id uuid, account_id uuid, state text, reasons jsonb, urgency real, failed_mark jsonb)),
     before AS (
       SELECT h.device_id, h.state FROM device_health h JOIN incoming i ON i.device_id = h.device_id),
     saved AS (
       INSERT INTO device_health (device_id, account_id, state, reasons, urgency, failed_mark, evaluated_at, changed_at)
       SELECT i.device_id, i.account_id, i.state, i.reasons, i.urgency, i.failed_mark, ?, ?
         FROM incoming i JOIN devices d ON d.id = i.device_id AND d.account_id = i.account_id
       ON CONFLICT (device_id) DO UPDATE
          SET state = EXCLUDED.state, reasons = EXCLUDED.reasons, urgency = EXCLUDED.urgency,
              failed_mark = EXCLUDED.failed_mark,
              evaluated_at = EXCLUDED.evaluated_at,
              changed_at = CASE WHEN device_health.state = EXCLUDED.state THEN device_health.changed_at ELSE EXCLUDED.changed_at END,
              account_id = EXCLUDED.account_id
       RETURNING device_id, state)
     SELECT s.device_id, b.state AS previous, s.state FROM saved s LEFT JOIN before b ON b.device_id = s.device_id`,
    [payload, input.now, input.now],
  );
  return result.rows
    .map((r) => ({
      deviceId: r.device_id,
      previous: (r.previous ?? 'ok') as HealthState,
      state: r.state as HealthState,
    }))
    .filter((r) => r.previous !== r.state);
}

export interface MaintenanceRow {
  serial: string;
  name: string;
  model: string;
  firmware: string | null;
  tags: Record<string, string>;
  site_id: string | null;
  site_name: string | null;
  state: HealthState;
  reasons: HealthReason[];
  urgency: number;
  changed_at: Date;
  evaluated_at: Date;
}

/** Devices not `ok`, most urgent first; filters by model name, one tag and a site id. */
export async function selectMaintenance(
  knex: Knex,
  input: { accountId: string; model?: string; tag?: { key: string; value: string }; siteId?: string; limit: number },
): Promise<MaintenanceRow[]> {
  const q = knex('device_health as h')
    .join('devices as d', function () {
      this.on('d.id', '=', 'h.device_id').andOn('d.account_id', '=', 'h.account_id');
    })
    .join('models as m', 'm.id', 'd.model_id')
    .leftJoin('sites as s', 's.id', 'd.site_id')
    .where('h.account_id', input.accountId)
    .whereNot('h.state', 'ok')
    .select('d.serial', 'd.name', 'm.name as model', 'd.firmware', 'd.tags', 'd.site_id', 's.name as site_name')
    .select('h.state', 'h.reasons', 'h.urgency', 'h.changed_at', 'h.evaluated_at')
    .orderBy([{ column: 'h.urgency', order: 'desc' }, { column: 'd.serial' }])
    .limit(input.limit);
  if (input.model !== undefined) q.where('m.name', input.model);
  if (input.tag !== undefined) q.whereRaw('d.tags ->> ? = ?', [input.tag.key, input.tag.value]);
  if (input.siteId !== undefined) q.where('d.site_id', input.siteId);
  return (await q) as MaintenanceRow[];
}

/** Devices per health state (devices without a verdict are not counted). */
export async function countByState(knex: Knex, input: { accountId: string }): Promise<Record<string, number>> {
  const result = await knex.raw<{ rows: Array<{ state: string; n: string | number }> }>(
    'SELECT state, count(*) AS n FROM device_health WHERE account_id = ? GROUP BY state',
    [input.accountId],
  );
  return Object.fromEntries(result.rows.map((r) => [r.state, Number(r.n)]));
}

export interface DeviceHealthRow {
  device_id: string;
  state: HealthState;
  reasons: HealthReason[];
  urgency: number;
  changed_at: Date;
  evaluated_at: Date;
}

/** The verdicts of some devices of the account (a device never judged has no row). */
export async function selectDeviceHealths(
  knex: Knex,
  input: { accountId: string; deviceIds: readonly string[] },
): Promise<DeviceHealthRow[]> {
  if (input.deviceIds.length === 0) return [];
  return knex('device_health')
    .where({ account_id: input.accountId })
    .whereIn('device_id', input.deviceIds)
    .select('device_id', 'state', 'reasons', 'urgency', 'changed_at', 'evaluated_at');
}
