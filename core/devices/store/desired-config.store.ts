import type { Db } from '../../db/db';

/** A device's desired configuration and its version, as the broker sends it on each connection. */
export interface StoredDesiredConfig {
  deviceId: string;
  accountId: string;
  version: number;
  config: Record<string, unknown>;
}

interface DesiredConfigRow {
  id: string;
  account_id: string;
  desired_config_version: number | string;
  desired_config: Record<string, unknown> | string | null;
}

/** The desired configurations of these devices (any account: the caller checks). */
export async function selectDesiredConfigs(db: Db, input: { deviceIds: string[] }): Promise<StoredDesiredConfig[]> {
  if (input.deviceIds.length === 0) return [];
  const rows: DesiredConfigRow[] = await db('devices')
    .whereRaw('id = ANY(?::uuid[])', [input.deviceIds])
    .select('id', 'account_id', 'desired_config_version', 'desired_config');
  return rows.map((r) => ({
    deviceId: r.id,
    accountId: r.account_id,
    version: Number(r.desired_config_version),
    config:
      typeof r.desired_config === 'string'
        ? (JSON.parse(r.desired_config) as Record<string, unknown>)
        : (r.desired_config ?? {}),
  }));
}
