import type { Knex } from 'knex';

type Num = string | number | null;

/** Event sums and exposure of a group of roll-up rows. */
export interface ExposureRow {
  devices: Num;
  /** Rows: device-days for daily roll-ups, device-hours for hourly ones. */
  rows: Num;
  gear_thermal_derating: Num;
  gear_thermal_shutdown: Num;
  supply_undervoltage: Num;
  supply_overvoltage: Num;
  source_failures: Num;
}

/** A group with no roll-up rows. */
export const EMPTY_EXPOSURE: ExposureRow = {
  devices: 0,
  rows: 0,
  gear_thermal_derating: 0,
  gear_thermal_shutdown: 0,
  supply_undervoltage: 0,
  supply_overvoltage: 0,
  source_failures: 0,
};

const SUMS = `count(DISTINCT r.device_id) AS devices, count(*) AS rows,
  sum(r.gear_thermal_derating) AS gear_thermal_derating, sum(r.gear_thermal_shutdown) AS gear_thermal_shutdown,
  sum(r.supply_undervoltage) AS supply_undervoltage, sum(r.supply_overvoltage) AS supply_overvoltage,
  sum(r.source_failures) AS source_failures`;

/**
 * Per model and firmware version, from the daily roll-ups (attributed to what the device ran that
 * day, so a later upgrade does not move the past): a device upgraded during a day has a row for
 * each version that day, each counted as a device-day (documented as a small overstatement).
 */
export async function selectVersionRates(
  knex: Knex,
  input: { accountId: string; from: Date; to: Date; model?: string },
): Promise<Array<ExposureRow & { model: string; firmware: string | null }>> {
  const model = input.model !== undefined ? 'AND a.model = ?' : '';
  const result = await knex.raw<{ rows: Array<ExposureRow & { model: string; firmware: string | null }> }>(
    `SELECT a.model, a.firmware, ${SUMS}
       FROM luminaire_daily r JOIN luminaire_attributions a ON a.id = r.attribution_id AND a.account_id = r.account_id
      WHERE r.account_id = ? AND r.bucket >= ? AND r.bucket < ? ${model}
      GROUP BY a.model, a.firmware ORDER BY a.model, a.firmware`,
    input.model !== undefined
      ? [input.accountId, input.from, input.to, input.model]
      : [input.accountId, input.from, input.to],
  );
  return result.rows;
}

/**
 * A deployment's canary and control from the hourly roll-ups since the hour it started in (rows =
 * device-hours; the hour it started in counts whole, else a deployment would see nothing for up
 * to an hour):
 * - updated: the deployment's devices in hours attributed to the target version;
 * - control: devices of the same model in hours attributed to another version, not counting the
 *   deployment's devices' hours after their update (they are on the target then, so they fall in
 *   `updated`), so a device contributes to control until it is updated.
 * Baseline: the model's daily rows on other versions in the days before the deployment started.
 */
export async function selectDeploymentGroups(
  knex: Knex,
  input: { accountId: string; deploymentId: string; model: string; target: string; since: Date; baselineFrom: Date },
): Promise<{ updated: ExposureRow; control: ExposureRow; baseline: ExposureRow }> {
  const hourly = await knex.raw<{ rows: Array<ExposureRow & { grp: string }> }>(
    `SELECT CASE WHEN a.firmware = ? THEN 'updated' ELSE 'control' END AS grp, ${SUMS}
       FROM luminaire_hourly r JOIN luminaire_attributions a ON a.id = r.attribution_id AND a.account_id = r.account_id
      WHERE r.account_id = ? AND r.bucket >= ? AND a.model = ?
        AND (a.firmware IS DISTINCT FROM ? OR EXISTS (
              SELECT 1 FROM device_updates u WHERE u.deployment_id = ? AND u.device_id = r.device_id))
      GROUP BY 1`,
    [
      input.target,
      input.accountId,
      new Date(Math.floor(input.since.getTime() / 3_600_000) * 3_600_000),
      input.model,
      input.target,
      input.deploymentId,
    ],
  );
  const baseline = await knex.raw<{ rows: ExposureRow[] }>(
    `SELECT ${SUMS}
       FROM luminaire_daily r JOIN luminaire_attributions a ON a.id = r.attribution_id AND a.account_id = r.account_id
      WHERE r.account_id = ? AND r.bucket >= ? AND r.bucket < ? AND a.model = ? AND a.firmware IS DISTINCT FROM ?`,
    [input.accountId, input.baselineFrom, input.since, input.model, input.target],
  );
  const of = (grp: string): ExposureRow => hourly.rows.find((r) => r.grp === grp) ?? EMPTY_EXPOSURE;
  return { updated: of('updated'), control: of('control'), baseline: baseline.rows[0] ?? EMPTY_EXPOSURE };
}

/** Reboots, reconnects and connection days (rows of device_connection_days) of a group. */
export interface ConnectionRow {
  devices: Num;
  days: Num;
  unexpected_reboots: Num;
  reconnects: Num;
}

const CONNECTION_SUMS = `count(DISTINCT c.device_id) AS devices, count(*) AS days,
  sum(c.unexpected_reboots) AS unexpected_reboots, sum(c.reconnects) AS reconnects`;

/** The first UTC day that starts at or after `at` (as YYYY-MM-DD): day rows are whole days, like the daily roll-ups' buckets. */
const dayAtOrAfter = (at: Date): string => {
  const midnight = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
  return new Date(midnight < at.getTime() ? midnight + 86_400_000 : midnight).toISOString().slice(0, 10);
};
/** The UTC day `at` falls in. */
const dayOf = (at: Date): string => at.toISOString().slice(0, 10);

/** Per model and firmware version over the days starting in [from, to) ('' firmware: never reported, as null). */
export async function selectVersionConnections(
  knex: Knex,
  input: { accountId: string; from: Date; to: Date; model?: string },
): Promise<Array<ConnectionRow & { model: string; firmware: string | null }>> {
  const model = input.model !== undefined ? 'AND c.model = ?' : '';
  const bindings = [input.accountId, dayAtOrAfter(input.from), dayAtOrAfter(input.to)];
  const result = await knex.raw<{ rows: Array<ConnectionRow & { model: string; firmware: string | null }> }>(
    `SELECT c.model, NULLIF(c.firmware, '') AS firmware, ${CONNECTION_SUMS}
       FROM device_connection_days c
      WHERE c.account_id = ? AND c.day >= ?::date AND c.day < ?::date ${model}
      GROUP BY c.model, c.firmware ORDER BY c.model, c.firmware`,
    input.model !== undefined ? [...bindings, input.model] : bindings,
  );
  return result.rows;
}

/**
 * A deployment's groups from the connection days, with the rule of selectDeploymentGroups at a
 * day's grain: days from the one the deployment started on; a device updated during a day has a
 * day in each group.
 */
export async function selectDeploymentConnections(
  knex: Knex,
  input: { accountId: string; deploymentId: string; model: string; target: string; since: Date; baselineFrom: Date },
): Promise<{ updated: ConnectionRow; control: ConnectionRow; baseline: ConnectionRow }> {
  const groups = await knex.raw<{ rows: Array<ConnectionRow & { grp: string }> }>(
    `SELECT CASE WHEN c.firmware = ? THEN 'updated' ELSE 'control' END AS grp, ${CONNECTION_SUMS}
       FROM device_connection_days c
      WHERE c.account_id = ? AND c.day >= ?::date AND c.model = ?
        AND (c.firmware <> ? OR EXISTS (
              SELECT 1 FROM device_updates u WHERE u.deployment_id = ? AND u.device_id = c.device_id))
      GROUP BY 1`,
    [input.target, input.accountId, dayOf(input.since), input.model, input.target, input.deploymentId],
  );
  const baseline = await knex.raw<{ rows: ConnectionRow[] }>(
    `SELECT ${CONNECTION_SUMS}
       FROM device_connection_days c
      WHERE c.account_id = ? AND c.day >= ?::date AND c.day < ?::date AND c.model = ? AND c.firmware <> ?`,
    [input.accountId, dayAtOrAfter(input.baselineFrom), dayOf(input.since), input.model, input.target],
  );
  const empty: ConnectionRow = { devices: 0, days: 0, unexpected_reboots: 0, reconnects: 0 };
  const of = (grp: string): ConnectionRow => groups.rows.find((r) => r.grp === grp) ?? empty;
  return { updated: of('updated'), control: of('control'), baseline: baseline.rows[0] ?? empty };
}
