import type { Knex } from 'knex';
import type { DeviceStatus } from '../../devices/device-types';

/** One group of the account's devices: same model, installed firmware and status. */
export interface DeviceGroupCount {
  model: string;
  firmware: string | null;
  status: DeviceStatus;
  count: number;
  site: { id: string; name: string } | null;
}

interface GroupRow {
  model: string;
  firmware: string | null;
  status: DeviceStatus;
  count: string | number;
  site_id: string | null;
  site_name: string | null;
}

/** The account's devices counted by model, firmware and status, in one grouped statement. */
export async function countDevicesByGroup(
  db: Knex | Knex.Transaction,
  input: { accountId: string },
): Promise<DeviceGroupCount[]> {
  const rows: GroupRow[] = await db('devices as d')
    .join('models as m', 'm.id', 'd.model_id')
    .leftJoin('sites as s', 's.id', 'd.site_id')
    .where('d.account_id', input.accountId)
    .groupBy('m.name', 'd.firmware', 'd.status', 'd.site_id', 's.name')
    .select('m.name as model', 'd.firmware', 'd.status', 'd.site_id', 's.name as site_name')
    .count('* as count');
  return rows.map((r) => ({
    model: r.model,
    firmware: r.firmware,
    status: r.status,
    count: Number(r.count),
    site: r.site_id === null ? null : { id: r.site_id, name: r.site_name ?? '' },
  }));
}
