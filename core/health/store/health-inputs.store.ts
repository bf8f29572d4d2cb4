import type { Knex } from 'knex';

type Num = string | number | null;

/** A device's figures for the health rules: lifetime and the sums of its daily roll-ups since `since`. */
export interface HealthInputRow {
  device_id: string;
  account_id: string;
  serial: string;
  model: string;
  health_thresholds: Record<string, number> | null;
  rated_life_h: Num;
  lifetime_burn_s: Num;
  days: Num;
  gear_thermal_derating: Num;
  gear_thermal_shutdown: Num;
  supply_undervoltage: Num;
  supply_overvoltage: Num;
  source_failures: Num;
  gear_temp_max: Num;
  /** The light source failure counter's segment (its offset) and value (counter-segments.ts); null: never reported. */
  source_failure_segment: Num;
  source_failure_value: Num;
  /** The previous verdict's failure mark (health-rules.ts FailureMark). */
  failed_mark: { segment: number; failures: number; at: string } | null;
}

/**
 * Every device of the account (or the listed ones) with luminaire data. The window's figures
 * come from the daily roll-ups of this account (an earlier owner's days are not this account's),
 * the rated life from the latest reading. One statement per account: the health pass runs for
 * every account every few minutes.
 */
export async function selectHealthInputs(
  knex: Knex,
  input: { accountId: string; since: Date; deviceIds?: string[] },
): Promise<HealthInputRow[]> {
  const only = input.deviceIds ? 'AND d.id = ANY(?::uuid[])' : '';
  const result = await knex.raw<{ rows: HealthInputRow[] }>(
    `SELECT d.id AS device_id, d.account_id, d.serial, m.name AS model, m.health_thresholds,
            (s.latest ->> 'rated_life_h')::float8 AS rated_life_h,
            w.lifetime_burn_s, w.days, w.gear_thermal_derating, w.gear_thermal_shutdown,
            w.supply_undervoltage, w.supply_overvoltage, w.source_failures, w.gear_temp_max,
            (s.counters -> 'source_failures' ->> 'offset')::float8 AS source_failure_segment,
            (s.counters -> 'source_failures' ->> 'last')::float8 AS source_failure_value,
            h.failed_mark
       FROM luminaire_state s
       JOIN devices d ON d.id = s.device_id AND d.account_id = s.account_id
       JOIN models m ON m.id = d.model_id
       LEFT JOIN device_health h ON h.device_id = d.id AND h.account_id = d.account_id
       LEFT JOIN LATERAL (
         SELECT max(r.lifetime_burn_s) AS lifetime_burn_s, count(DISTINCT r.bucket) AS days,
                sum(r.gear_thermal_derating) AS gear_thermal_derating, sum(r.gear_thermal_shutdown) AS gear_thermal_shutdown,
                sum(r.supply_undervoltage) AS supply_undervoltage, sum(r.supply_overvoltage) AS supply_overvoltage,
                sum(r.source_failures) AS source_failures, max(r.gear_temp_max) AS gear_temp_max
           FROM luminaire_daily r
          WHERE r.device_id = d.id AND r.account_id = d.account_id AND r.bucket >= ?) w ON true
      WHERE s.account_id = ? ${only}`,
    input.deviceIds ? [input.since, input.accountId, input.deviceIds] : [input.since, input.accountId],
  );
  return result.rows;
}

/** Accounts with luminaire data (the health pass walks them). */
export async function selectAccountsWithLuminaires(knex: Knex): Promise<string[]> {
  const rows = (
    await knex.raw<{ rows: Array<{ account_id: string }> }>('SELECT DISTINCT account_id FROM luminaire_state')
  ).rows;
  return rows.map((r) => r.account_id);
}
