import type { Knex } from 'knex';

export interface FirmwareSpan {
  firmware: string | null;
  from: string;
  to: string;
}

/** The account's current device of that serial, or the ones it owned before (warranty_records, not yet expired). */
export async function selectWarrantySubjects(
  knex: Knex,
  input: { accountId: string; serial: string; now: Date },
): Promise<
  Array<{
    device_id: string;
    serial: string;
    model: string;
    claimed_at: Date;
    unclaimed_at: Date | null;
    firmware_history: FirmwareSpan[];
  }>
> {
  const current = await knex('devices as d')
    .join('models as m', 'm.id', 'd.model_id')
    .where({ 'd.account_id': input.accountId, 'd.serial': input.serial })
    .select('d.id as device_id', 'd.serial', 'm.name as model', 'd.claimed_at');
  const former = await knex('warranty_records')
    .where({ account_id: input.accountId, serial: input.serial })
    .where('keep_until', '>', input.now)
    .orderBy('claimed_at', 'desc')
    .select('device_id', 'serial', 'model', 'claimed_at', 'unclaimed_at', 'firmware_history');
  return [
    ...current.map((c: { device_id: string; serial: string; model: string; claimed_at: Date }) => ({
      ...c,
      unclaimed_at: null,
      firmware_history: [],
    })),
    ...(former as Array<{
      device_id: string;
      serial: string;
      model: string;
      claimed_at: Date;
      unclaimed_at: Date;
      firmware_history: FirmwareSpan[];
    }>),
  ];
}

/** Firmware spans from the device's daily roll-ups in this account (first and last day on each version). */
export async function selectFirmwareSpans(
  knex: Knex,
  input: { accountId: string; deviceId: string },
): Promise<FirmwareSpan[]> {
  const rows = (
    await knex.raw<{ rows: Array<{ firmware: string | null; first: Date; last: Date }> }>(
      `SELECT a.firmware, min(r.bucket) AS first, max(r.bucket) AS last
         FROM luminaire_daily r JOIN luminaire_attributions a ON a.id = r.attribution_id AND a.account_id = r.account_id
        WHERE r.device_id = ? AND r.account_id = ? GROUP BY a.firmware ORDER BY min(r.bucket)`,
      [input.deviceId, input.accountId],
    )
  ).rows;
  const day = (d: Date): string => new Date(d).toISOString().slice(0, 10);
  return rows.map((r) => ({ firmware: r.firmware, from: day(r.first), to: day(r.last) }));
}

/** Succeeded updates of the device (while it is claimed; an unclaim deletes them, so they are copied then). */
export async function selectSucceededUpdates(
  db: Knex | Knex.Transaction,
  input: { deviceId: string },
): Promise<Array<{ from_version: string | null; target_version: string; finished_at: Date }>> {
  return db('device_updates')
    .where({ device_id: input.deviceId, state: 'succeeded' })
    .whereNotNull('finished_at')
    .orderBy('finished_at')
    .select('from_version', 'target_version', 'finished_at');
}

export interface MonthRow {
  month: Date;
  days: string | number;
  energy_wh: number | null;
  lifetime_energy_wh: number | null;
  lifetime_burn_s: string | number | null;
  gear_thermal_derating: string | number;
  gear_thermal_shutdown: string | number;
  supply_undervoltage: string | number;
  supply_overvoltage: string | number;
  source_failures: string | number;
  counter_resets: string | number;
}

/** Fault counters and energy per calendar month (UTC) from the daily roll-ups of this account. */
export async function selectMonthlyEvidence(
  knex: Knex,
  input: { accountId: string; deviceId: string },
): Promise<MonthRow[]> {
  return (
    await knex.raw<{ rows: MonthRow[] }>(
      `SELECT date_trunc('month', r.bucket AT TIME ZONE 'UTC') AS month, count(DISTINCT r.bucket) AS days,
              sum(r.energy_wh) AS energy_wh, max(r.lifetime_energy_wh) AS lifetime_energy_wh, max(r.lifetime_burn_s) AS lifetime_burn_s,
              sum(r.gear_thermal_derating) AS gear_thermal_derating, sum(r.gear_thermal_shutdown) AS gear_thermal_shutdown,
              sum(r.supply_undervoltage) AS supply_undervoltage, sum(r.supply_overvoltage) AS supply_overvoltage,
              sum(r.source_failures) AS source_failures, sum(r.counter_resets) AS counter_resets
         FROM luminaire_daily r WHERE r.device_id = ? AND r.account_id = ?
        GROUP BY 1 ORDER BY 1`,
      [input.deviceId, input.accountId],
    )
  ).rows;
}

/** At unclaim: what the owning account needs for a claim, kept until `keepUntil`. */
export async function insertWarrantyRecord(
  trx: Knex.Transaction,
  input: {
    accountId: string;
    deviceId: string;
    serial: string;
    model: string;
    claimedAt: Date;
    unclaimedAt: Date;
    keepUntil: Date;
    firmwareHistory: unknown[];
  },
): Promise<void> {
  await trx('warranty_records')
    .insert({
      account_id: input.accountId,
      device_id: input.deviceId,
      serial: input.serial,
      model: input.model,
      claimed_at: input.claimedAt,
      unclaimed_at: input.unclaimedAt,
      keep_until: input.keepUntil,
      firmware_history: JSON.stringify(input.firmwareHistory),
    })
    .onConflict(['account_id', 'device_id'])
    .ignore();
}

/** Housekeeping: records past their warranty period. */
export async function deleteExpiredWarrantyRecords(db: Knex, now: Date): Promise<number> {
  return (
    (await db.raw<{ rowCount: number | null }>('DELETE FROM warranty_records WHERE keep_until < ?', [now])).rowCount ??
    0
  );
}

/** Serial, model and claim date of a device about to be unclaimed. */
export async function selectDeviceForWarranty(
  trx: Knex.Transaction,
  input: { accountId: string; deviceId: string },
): Promise<{ serial: string; model: string; claimed_at: Date } | undefined> {
  return trx('devices as d')
    .join('models as m', 'm.id', 'd.model_id')
    .where({ 'd.id': input.deviceId, 'd.account_id': input.accountId })
    .first('d.serial', 'm.name as model', 'd.claimed_at');
}
