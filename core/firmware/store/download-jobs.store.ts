import type { Knex } from 'knex';
import type { UpdateState } from '../../deployments/deployment-types';

/** An update job as its download link sees it: whose it is, where it stands, and its binary. */
export interface DownloadJob {
  id: string;
  deviceId: string;
  firmwareVersionId: string;
  state: UpdateState;
  sha256: string;
  size: number;
  storageKey: string | null;
  version: string;
}

interface JobRow {
  id: string;
  device_id: string;
  firmware_version_id: string;
  state: UpdateState;
  sha256: string;
  size: number | string;
  storage_key: string | null;
  version: string;
}

const toDownloadJob = (row: JobRow): DownloadJob => ({
  id: row.id,
  deviceId: row.device_id,
  firmwareVersionId: row.firmware_version_id,
  state: row.state,
  sha256: row.sha256,
  size: Number(row.size),
  storageKey: row.storage_key,
  version: row.version,
});

/** The jobs with these ids (unknown ones are left out). */
export async function downloadJobs(db: Knex | Knex.Transaction, ids: readonly string[]): Promise<DownloadJob[]> {
  // One array parameter rather than a list of up to 500 (parsed and planned each time).
  const rows = (
    await db.raw<{ rows: JobRow[] }>(
      `SELECT u.id, u.device_id, u.firmware_version_id, u.state, f.sha256, f.size, f.storage_key, f.version
       FROM device_updates u JOIN firmware_versions f ON f.id = u.firmware_version_id
      WHERE u.id = ANY(?::uuid[])`,
      [[...ids]],
    )
  ).rows;
  return rows.map(toDownloadJob);
}
