import type { Knex } from 'knex';
import type { DeviceConfig } from '../devices/device-config';
import type { UpdateRef } from './update-transitions';

/** A queued update with what its command and the dispatch rules need. */
export interface Candidate extends UpdateRef {
  firmware_version_id: string;
  /** The reported firmware's key; null until the device reported one. */
  firmware_key: string | null;
  desired_config: DeviceConfig | null;
  tags: Record<string, string> | null;
  sha256: string;
  size: number | string;
  storage_key: string | null;
  signature: string | null;
  signing_key_id: string | null;
}

/**
 * Locks the next page of at most `limit` queued updates of a deployment (after `after`, in the
 * opened batches; only those of `readyDeviceIds` when given) and returns those whose device may
 * get its command now: online (or just ready) and with a known firmware. Null when nothing is
 * left.
 *
 * Two statements, each with one plan whatever the statistics say. Planned as one join, a
 * deployment created after the last ANALYZE (statistics saying no device is online and no
 * update queued) made PostgreSQL loop over the devices and scan the updates for each: 48 s for
 * one page, a 10,000-device campaign sent 41-57 s late (bench/ota.bench.ts with analyzed
 * tables). First the page of queued rows, locked, from the updates alone; then what is needed
 * to send them, by id, filtered here rather than by a predicate the statistics misjudge.
 */
export async function lockDispatchPage(
  trx: Knex.Transaction,
  input: {
    deploymentId: string;
    batch: number;
    after: string;
    limit: number;
    readyDeviceIds?: string[];
    /** The devices' configuration (maintenance windows) and tags (tag limit) are read only when a rule needs them: they were most of the bytes of a page. */
    withConfig?: boolean;
    withTags?: boolean;
  },
): Promise<{ candidates: Candidate[]; more: boolean; last: string } | null> {
  const ready = input.readyDeviceIds;
  const limit = Math.max(1, Math.floor(input.limit));
  const locked = (await trx.raw(
    `SELECT id FROM device_updates
      WHERE deployment_id = ? AND state = 'queued' AND batch <= ? AND id > ?${ready ? ' AND device_id = ANY(?::uuid[])' : ''}
      ORDER BY id LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`,
    [input.deploymentId, input.batch, input.after, ...(ready ? [ready] : [])],
  )).rows as Array<{ id: string }>;
  if (locked.length === 0) return null;
  const rows = (await trx.raw(
    `SELECT u.id, u.account_id, u.device_id, u.deployment_id, d.serial, u.target_version, u.from_version, u.firmware_version_id,
            CASE WHEN d.firmware IS NULL THEN NULL ELSE d.firmware_key END AS firmware_key, d.connectivity, ${input.withConfig ? 'd.desired_config' : 'NULL AS desired_config'}, ${input.withTags ? 'd.tags' : 'NULL AS tags'},
            f.sha256, f.size, f.storage_key, f.signature, f.signing_key_id
       FROM device_updates u
       JOIN devices d ON d.id = u.device_id
       JOIN firmware_versions f ON f.id = u.firmware_version_id
      WHERE u.id = ANY(?::uuid[])
      ORDER BY u.id`,
    [locked.map((r) => r.id)],
  )).rows as Array<Candidate & { connectivity: string }>;
  // Until its first heartbeat says what it runs, a device is not sent anything: it may already
  // run the target (claimed on it, or installed over USB). The heartbeat dispatches. Before
  // that, firmware_key holds the version its claim installs (for comparisons only), so the key
  // counts here only once `firmware` was reported.
  const candidates = rows.filter((c) => c.firmware_key !== null && (ready !== undefined || c.connectivity === 'online'));
  return { candidates, more: locked.length === limit, last: locked[locked.length - 1]!.id };
}
