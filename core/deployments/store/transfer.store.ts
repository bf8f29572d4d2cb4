import type { Db } from '../../db/db';

/**
 * Bytes the deployments' commands sent devices to download, against the full images
 * (docs/ota.md "Delta images"): per update whose command went out (`sent_at`), the delta its
 * last command offered, or the full image; an update that fell back from its delta counts both.
 */
export async function transferOf(
  db: Db,
  deploymentIds: string[],
): Promise<Array<{ deploymentId: string; bytesSent: number; fullImageBytes: number; deltaUpdates: number }>> {
  if (deploymentIds.length === 0) return [];
  const { rows } = await db.raw<{
    rows: Array<{ deployment_id: string; sent: string; full: string; deltas: number }>;
  }>(
    `SELECT u.deployment_id,
            sum(CASE WHEN u.delta_refused THEN f.size + coalesce(fd.size, 0)
                     WHEN fd.size IS NOT NULL THEN fd.size ELSE f.size END) AS sent,
            sum(f.size) AS full,
            (count(fd.id) FILTER (WHERE NOT u.delta_refused))::int AS deltas
       FROM device_updates u
       JOIN firmware_versions f ON f.id = u.firmware_version_id
       LEFT JOIN firmware_deltas fd ON fd.id = u.delta_id
      WHERE u.deployment_id = ANY(?::uuid[]) AND u.sent_at IS NOT NULL
      GROUP BY u.deployment_id`,
    [deploymentIds],
  );
  // sum() of bigint is numeric: the driver gives strings.
  return rows.map((r) => ({
    deploymentId: r.deployment_id,
    bytesSent: Number(r.sent),
    fullImageBytes: Number(r.full),
    deltaUpdates: r.deltas,
  }));
}
