import type { BenchServer } from './bench-server';
import { versionKey } from '#core/shared/version';

/**
 * What past deployments leave behind a fleet in service: `updates` finished deployments of the
 * account's model, the newest `newestDaysAgo` days old and each five days before the next, and
 * a succeeded update of every device of the account in each. Written as rows (no device takes
 * these updates): a bench of the connection path then pays for the reads a device's update
 * history costs a reconnect (the rollout health gate, core/deployments/store/update-health.store.ts),
 * which a freshly claimed fleet never shows.
 */
export async function addUpdateHistory(
  server: BenchServer,
  input: { accountId: string; updates: number; newestDaysAgo?: number },
): Promise<void> {
  if (input.updates <= 0) return;
  const newest = input.newestDaysAgo ?? 2;
  await server.sql(
    `INSERT INTO firmware_versions (id, account_id, model_id, version, version_key, size, sha256)
     SELECT gen_random_uuid(), m.account_id, m.id, '0.9.0', ?, 1024, repeat('0', 64) FROM models m WHERE m.account_id = ?`,
    [versionKey('0.9.0'), input.accountId],
  );
  await server.sql(
    `INSERT INTO deployments (id, account_id, firmware_version_id, model_id, target_version, status, target_count,
                              started_at, finished_at, created_at, updated_at)
     SELECT gen_random_uuid(), f.account_id, f.id, f.model_id, f.version, 'finished',
            (SELECT count(*) FROM devices d WHERE d.account_id = f.account_id),
            t.at, t.at + interval '1 day', t.at, t.at + interval '1 day'
       FROM firmware_versions f
      CROSS JOIN LATERAL (SELECT now() - make_interval(days => ? + 5 * g) AS at FROM generate_series(0, ? - 1) g) t
      WHERE f.account_id = ? AND f.version = '0.9.0'`,
    [newest, input.updates, input.accountId],
  );
  await server.sql(
    `INSERT INTO device_updates (id, account_id, deployment_id, device_id, firmware_version_id, from_version,
                                 target_version, state, progress, sent_at, state_changed_at, finished_at, created_at)
     SELECT gen_random_uuid(), p.account_id, p.id, d.id, p.firmware_version_id, '0.8.0', p.target_version, 'succeeded', 100,
            p.created_at + interval '1 hour', p.created_at + interval '2 hours', p.created_at + interval '2 hours', p.created_at
       FROM deployments p JOIN devices d ON d.account_id = p.account_id
      WHERE p.account_id = ? AND p.target_version = '0.9.0'
      ORDER BY p.created_at, d.id`,
    [input.accountId],
  );
}
