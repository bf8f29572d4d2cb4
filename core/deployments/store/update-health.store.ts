import type { Knex } from 'knex';
import { MAX_HEALTH_WINDOW_MINUTES } from '../deployment-types';
import { preparedRaw } from '../../db/prepared';

/** A reconnect counted against the last update that succeeded on a device. */
export interface HealthCount {
  id: string;
  deviceId: string;
  accountId: string;
  deploymentId: string;
  reconnectsAfter: number;
  /** Set when this reconnect went over the deployment's limit. */
  healthFailedAt: Date | null;
  windowMinutes: number;
}

interface HealthCountRow {
  id: string;
  device_id: string;
  account_id: string;
  deployment_id: string;
  reconnects_after: number;
  health_failed_at: Date | null;
  window_minutes: number;
}

/**
 * Rollout health gate: each reconnect within the window after a device's last successful
 * update is counted; more than the deployment's limit marks that update unhealthy (a failure)
 * and writes its history row. Only the last update that ran on the device is judged: once a
 * newer one was sent, the reboots it causes are its own business, not a relapse of the one
 * before. The defaults apply to deployments without a rollout.
 *
 * ONE statement for the batch, count and history together (atomic on its own): it runs for
 * every batch of devices that come online, nearly always finding nothing, and as a transaction
 * of two statements it cost BEGIN and COMMIT round trips on top (bench/connections.bench.ts).
 *
 * Only updates that finished within the longest window a rollout may set are read, from the
 * index of succeeded updates by device and finish (migrations/20261129090000_succeeded_updates_by_device):
 * an older one is outside every window, and so is any before it. Read whole, a device's update
 * history cost the reconnect 34-48 µs of PostgreSQL with five old updates, against 2.6-4.2 µs
 * now (1,000 reconnecting devices, measured here).
 *
 * Prepared, and `db` should keep one plan for every value (Database.plannedOnce): PostgreSQL's own
 * choice (plan_cache_mode = auto) planned it again on every run, and for a batch of 18 devices
 * planning took 1.4 ms against 0.1-0.3 ms of execution (EXPLAIN ANALYZE, 8,000 devices with five
 * updates each). Its generic plan reads the same indexes whatever the values.
 */
export async function countReconnects(
  db: Knex | Knex.Transaction,
  input: { deviceIds: string[]; now: Date; defaultWindowMinutes: number; defaultMaxReconnects: number },
): Promise<HealthCount[]> {
  const rows = (
    await preparedRaw<{ rows: HealthCountRow[] }>(
      db,
      `WITH last AS (
         SELECT DISTINCT ON (u.device_id) u.id, u.device_id, u.account_id, u.deployment_id, u.finished_at,
                COALESCE((p.rollout ->> 'health_window_minutes')::float8, ?) AS window_minutes,
                COALESCE((p.rollout ->> 'health_max_reconnects')::int, ?) AS max_reconnects
           FROM device_updates u JOIN deployments p ON p.id = u.deployment_id
          WHERE u.device_id = ANY(?::uuid[]) AND u.state = 'succeeded' AND u.finished_at IS NOT NULL AND u.health_failed_at IS NULL
            AND u.next_hop_id IS NULL AND u.finished_at > ?::timestamptz - make_interval(mins => ?)
            AND NOT EXISTS (SELECT 1 FROM device_updates y WHERE y.device_id = u.device_id AND y.id <> u.id AND y.sent_at >= u.finished_at)
          ORDER BY u.device_id, u.finished_at DESC),
       counted AS (
         UPDATE device_updates u
            SET reconnects_after = u.reconnects_after + 1,
                health_failed_at = CASE WHEN u.reconnects_after + 1 > last.max_reconnects THEN ?::timestamptz ELSE NULL END
           FROM last
          WHERE u.id = last.id AND last.finished_at > ?::timestamptz - make_interval(secs => last.window_minutes * 60)
          RETURNING u.id, u.device_id, u.account_id, u.deployment_id, u.reconnects_after, u.health_failed_at, last.window_minutes),
       history AS (
         INSERT INTO device_events (account_id, device_id, type, data, occurred_at)
         SELECT account_id, device_id, 'update_step',
                jsonb_build_object('job_id', id, 'deployment_id', deployment_id, 'state', 'succeeded', 'health', 'failed',
                                   'reconnects', reconnects_after, 'window_minutes', window_minutes), ?::timestamptz
           FROM counted WHERE health_failed_at IS NOT NULL)
       SELECT * FROM counted`,
      [
        input.defaultWindowMinutes,
        input.defaultMaxReconnects,
        input.deviceIds,
        input.now,
        MAX_HEALTH_WINDOW_MINUTES,
        input.now,
        input.now,
        input.now,
      ],
    )
  ).rows;
  return rows.map((r) => ({
    id: r.id,
    deviceId: r.device_id,
    accountId: r.account_id,
    deploymentId: r.deployment_id,
    reconnectsAfter: r.reconnects_after,
    healthFailedAt: r.health_failed_at === null ? null : new Date(r.health_failed_at),
    windowMinutes: r.window_minutes,
  }));
}
