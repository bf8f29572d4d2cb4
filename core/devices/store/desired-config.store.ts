import type { Db } from '../../db/db';
import { preparedRaw } from '../../db/prepared';

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

/**
 * The desired configurations of these devices (any account: the caller checks). Prepared: the
 * broker reads them for every batch of devices that subscribe (bench/connection-capacity.bench.ts).
 */
export async function selectDesiredConfigs(db: Db, input: { deviceIds: string[] }): Promise<StoredDesiredConfig[]> {
  if (input.deviceIds.length === 0) return [];
  const { rows } = await preparedRaw<{ rows: DesiredConfigRow[] }>(
    db,
    'SELECT id, account_id, desired_config_version, desired_config FROM devices WHERE id = ANY(?::uuid[])',
    [input.deviceIds],
  );
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
